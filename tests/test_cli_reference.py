"""CLI.md is the command line's own help (tools/cli_reference.py writes it from the parser):
a flag, default or help text changed without it is a stale reference."""
import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_cli_md_is_what_the_parser_says():
    spec = importlib.util.spec_from_file_location("cli_reference", REPO / "tools" / "cli_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = mod.reference()
    assert (REPO / "CLI.md").read_text(encoding="utf-8") == text, \
        "CLI.md is stale: run python tools/cli_reference.py"
    for command in ("simulate", "bake", "preview", "train", "export-policy"):
        assert f"## sinew {command}\n" in text


def test_the_check_fails_on_a_stale_reference(tmp_path):
    """--check exits 1 when CLI.md differs (here: the file at its path, one line changed)."""
    tool = REPO / "tools" / "cli_reference.py"
    copy = tmp_path / "tools"
    copy.mkdir()
    (copy / "cli_reference.py").write_text(tool.read_text().replace('ROOT / "CLI.md"', f'Path({str(tmp_path / "CLI.md")!r})'))
    (tmp_path / "CLI.md").write_text((REPO / "CLI.md").read_text().replace("sinew info", "sinew inf0", 1))
    run = lambda: subprocess.run([sys.executable, str(copy / "cli_reference.py"), "--check"], cwd=REPO,  # noqa: E731
                                 capture_output=True, text=True)
    r = run()
    assert r.returncode == 1 and "stale" in r.stdout
