"""`seqjax train | eval | generate | bench`: the command line over the training package."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import sys

import numpy as np

from seqjax import config as config_lib

DEFAULT_WORKDIR = "runs"


def load_config(path: str | None) -> tuple[config_lib.Config, str]:
    """The config from an experiment file's `get_config()` (no file: the defaults), and its name."""
    if path is None:
        return config_lib.Config(), "default"
    if not os.path.isfile(path):
        raise ValueError(f"--config file does not exist: {path}")
    spec = importlib.util.spec_from_file_location("seqjax_experiment", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "get_config"):
        raise ValueError(f"--config file {path} must define get_config() -> seqjax.config.Config")
    cfg = module.get_config()
    if not isinstance(cfg, config_lib.Config):
        raise ValueError(f"get_config() in {path} must return seqjax.config.Config, got {type(cfg).__name__}")
    return cfg, os.path.splitext(os.path.basename(path))[0]


def run_config(workdir: str) -> config_lib.Config:
    path = os.path.join(workdir, "config.json")
    if not os.path.isfile(path):
        raise ValueError(f"--workdir {workdir} holds no run (no config.json)")
    with open(path) as f:
        return config_lib.from_dict(json.load(f))


def restored(workdir: str, overrides: list[str]):
    """The experiment and trained parameters of the run in `workdir` (latest checkpoint), with
    the mesh they sit on. The head is the plain one whatever the run's layout: decoding and
    evaluation need every word's probability."""
    from seqjax.models import is_trained
    from seqjax.training import optim
    from seqjax.training.experiment import build_experiment
    from seqjax.training.layout import make_mesh
    from seqjax.training.loop import open_run
    from seqjax.training.state import Checkpointer, restore_state

    cfg = config_lib.override(run_config(workdir), overrides)
    if not is_trained(cfg.model):
        raise ValueError(
            f"--workdir {workdir} is an n-gram run, which keeps no model: summary.json holds its perplexity"
        )
    checkpointer = Checkpointer.of_run(workdir, cfg.train.keep_checkpoints)
    try:
        step, tokenizers = open_run(cfg, workdir, checkpointer)
        if step is None:
            raise ValueError(f"--workdir {workdir} has no checkpoint yet")
        exp = build_experiment(cfg, tokenizers=tokenizers)
        mesh = make_mesh(cfg.train.mesh)
        optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
        state, _ = restore_state(exp, checkpointer, step, optimizer, mesh, exp.train_batches().batch(0))
    finally:
        checkpointer.close()
    return exp, state, mesh


def cmd_train(args) -> None:
    from seqjax.training.loop import train

    cfg, name = load_config(args.config)
    cfg = config_lib.override(cfg, args.set)
    train(cfg, args.workdir or os.path.join(DEFAULT_WORKDIR, name))


def decode_options(args):
    from seqjax.training.generation import DecodeOptions

    sample = args.temperature is not None or args.top_k is not None or args.top_p is not None
    return DecodeOptions(
        beam=args.beam,
        length_penalty=args.length_penalty,
        sample=sample,
        temperature=1.0 if args.temperature is None else args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
    )


def cmd_eval(args) -> None:
    from seqjax.training.evaluation import evaluate
    from seqjax.training.generation import translate
    from seqjax.training.steps import batch_scorer, make_eval_step

    options = decode_options(args)
    exp, state, mesh = restored(args.workdir, args.set)
    if args.split not in exp.data.splits:
        raise ValueError(f"--split must be one of {sorted(exp.data.splits)}, got {args.split!r}")
    score = batch_scorer(make_eval_step(exp.model, exp.head, mesh), state.params, mesh)
    result = {args.split: evaluate(exp.cfg, exp.data, args.split, score)}
    if exp.is_seq2seq:
        result["generation"] = translate(exp, state.params, args.split, options=options)
    if exp.task_report is not None:
        result[exp.cfg.data.task] = exp.task_report(exp, state.params)
    print(json.dumps(result, indent=2))


def cmd_generate(args) -> None:
    from seqjax.training.generation import lm_samples, translate_texts

    options = decode_options(args)
    overrides = args.set + [f"train.printed_sample_len={args.max_len}", f"train.num_printed_samples={args.num}"]
    exp, state, _ = restored(args.workdir, overrides)
    if exp.is_seq2seq:
        source = np.asarray(exp.data.src_tokenizer.encode(args.prompt), np.int32)
        (hypothesis,) = translate_texts(exp, state.params, [source], options)
        print(f"{args.prompt} -> {hypothesis}")
        return
    if not options.sample and options.beam == 1 and args.num > 1:
        options = dataclasses.replace(options, sample=True)  # several greedy continuations would all be equal
    lm_samples(exp, state.params, prompt=args.prompt, num=args.num, seed=args.seed, options=options)


def cmd_bench(args) -> None:
    import runpy

    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
    path = os.path.join(root, f"{args.name}.py")
    if not os.path.isfile(path):
        available = sorted(f[:-3] for f in os.listdir(root) if f.endswith(".py"))
        raise ValueError(f"unknown benchmark {args.name!r}; available: {available}")
    sys.argv = [path, *args.rest]
    runpy.run_path(path, run_name="__main__")


def add_decoding_arguments(p: argparse.ArgumentParser) -> None:
    d = p.add_argument_group("decoding (default greedy; any sampling flag samples; --beam N > 1 is beam search)")
    d.add_argument("--beam", type=int, default=1)
    d.add_argument("--length-penalty", type=float, default=0.0, help="GNMT alpha for beam search")
    d.add_argument("--temperature", type=float, default=None)
    d.add_argument("--top-k", type=int, default=None)
    d.add_argument("--top-p", type=float, default=None)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="seqjax", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train (or resume) a run; no arguments: the default experiment")
    t.add_argument("--config", help="experiment file defining get_config()")
    t.add_argument("--workdir", help=f"run directory (default {DEFAULT_WORKDIR}/<config name>)")
    t.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides, e.g. train.steps=200")
    t.set_defaults(func=cmd_train)
    e = sub.add_parser("eval", help="exact perplexity (and BLEU for seq2seq) of a trained run on a split")
    e.add_argument("--workdir", required=True)
    e.add_argument("--split", default="test")
    e.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    add_decoding_arguments(e)
    e.set_defaults(func=cmd_eval)
    g = sub.add_parser("generate", help="continue a prompt (LM) or translate it (seq2seq) with a trained run")
    g.add_argument("--workdir", required=True)
    g.add_argument("--prompt", default="")
    g.add_argument("--max-len", type=int, default=64)
    g.add_argument("--num", type=int, default=4)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    add_decoding_arguments(g)
    g.set_defaults(func=cmd_generate)
    b = sub.add_parser("bench", help="run a benchmark from benchmarks/ (e.g. softmax, lm_train)")
    b.add_argument("name")
    b.add_argument("rest", nargs=argparse.REMAINDER)
    b.set_defaults(func=cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    from seqjax.training.loop import NonFiniteLoss

    args = parser().parse_args(argv)
    try:
        args.func(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"seqjax: error: {err}", file=sys.stderr)
        return 2
    except NonFiniteLoss as err:
        print(f"seqjax: training stopped: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
