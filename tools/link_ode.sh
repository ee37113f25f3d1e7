#!/usr/bin/env bash
# Make Debian's ODE bindings (python3-pyode; the PyPI "pyode" is Python-2 only) visible to
# the virtual environment. ODE is the optional second physics backend; without it Sinew
# still runs on MuJoCo, so every failure here is a warning, not an error.
set -u
PY="$1"
so_glob=/usr/lib/python3/dist-packages/ode*.so
if ! ls $so_glob >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pyode) \
            >/dev/null 2>&1 || echo "warning: could not install python3-pyode; the ODE backend will be unavailable" >&2
    else
        echo "warning: python3-pyode is not installed (apt-get install python3-pyode as root); the ODE backend will be unavailable" >&2
    fi
fi
site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$site/_sinew_ode"
for so in $so_glob; do
    [ -e "$so" ] && ln -sf "$so" "$site/_sinew_ode/"
done
# Only the ode module itself, not the rest of Debian's dist-packages.
echo "$site/_sinew_ode" > "$site/sinew_ode.pth"
"$PY" -c 'import ode' 2>/dev/null && echo "ODE bindings: available" || echo "ODE bindings: not available"
exit 0
