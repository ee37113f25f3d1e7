"""The `sinew` command line (CLI.md): one module per command or family of commands, the
reports and plots they write beside a take, and where they find the sample motion.

    main.py               the `sinew` parser and dispatch; info, fatigue-curve, arm-hold, bench
    simulate.py           `sinew simulate`: a take, its report (report.txt, report.md) and plots
    bake.py               `sinew bake`: the Blender batch bake (scripts/sinew_bake.py)
    retarget.py           `sinew retarget`: a BVH clip onto the model
    preview.py            `sinew preview`: contact sheets and videos of references and takes
    bench.py              `sinew bench`: the muscle step and the simulation loop, stage by stage
    bench_controllers.py  `sinew bench`: the controllers (tracking, stand, balance, policy)
    take_report.py        a take's report lines beyond the summary
    take_plots.py         a take's plots (activation heatmap, fatigue by group, gait)
    plots.py              the figures of fatigue-curve and arm-hold
    sample_data.py        the reference motion folder (SINEW_MOTION_DIR or ../shared beside a checkout)

This package is the command line's and nothing else's: no module outside it imports it
(tests/test_imports.py), so the engine, training and the Blender add-on never load a parser.
Training's commands (train, export-policy) live in training/commands.py and reach `sinew`
through the entry points "sinew.commands" (pyproject.toml). Nothing is imported here: a
command module loads only what it needs.
"""
