"""`seqjax train | prepare | config | eval | generate | backtranslate | import-hf | export-hf | plot | compile |
bench`: the command line over the training package."""

from __future__ import annotations

import argparse
import sys

from seqjax.cli import compile, evaluate, generate, pretrained, tools, train
from seqjax.output_paths import check_outputs


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="seqjax", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    train.add_commands(sub)
    evaluate.add_commands(sub)
    generate.add_commands(sub)
    pretrained.add_commands(sub)
    tools.add_plot(sub)
    compile.add_commands(sub)
    tools.add_bench(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    from seqjax.gpu_flags import use_gpu_flags
    from seqjax.platforms import use_machine_platforms

    use_machine_platforms()  # before JAX starts a backend: no plugin started for a device the machine lacks
    use_gpu_flags()  # XLA reads its flags when the first backend starts
    from seqjax.training.core.signals import TrainingStopped
    from seqjax.training.loop import NonFiniteLoss

    args = parser().parse_args(argv)
    try:
        check_outputs(args)
        code = args.func(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"seqjax: error: {err}", file=sys.stderr)
        return 2
    except NonFiniteLoss as err:
        print(f"seqjax: training stopped: {err}", file=sys.stderr)
        return 1
    except TrainingStopped as stopped:
        return stopped.exit_code  # the run printed where it stopped
    except KeyboardInterrupt:
        print("seqjax: interrupted", file=sys.stderr)
        return 130
    return code or 0


def entry() -> int:
    """The `seqjax` executable: a process of its own, so before any computation it restarts
    itself with transparent huge pages for XLA's host buffers where that applies
    (`seqjax.training.core.host_heap`), then runs `main`."""
    from seqjax.training.core.host_heap import restart_with_huge_pages

    restart_with_huge_pages()
    return main()
