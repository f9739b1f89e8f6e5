"""``regioncount build ...``: write a network to an .npz model file (random networks, the theory's
constructions, the Maxout -> Transformer compiler), refusing up front what would pass --memory-cap."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from regioncount import RegionCountError

from . import _validate as checks
from ._common import fail, guarded, parse_ints
from ._validate import MemoryCapOpt, at_least, box_callback, finite, one_of

build_app = typer.Typer(
    help="Write a network to an .npz model file: random networks and constructions.", no_args_is_help=True
)

# Options several build commands share
OutOpt = Annotated[Path, typer.Option(help="Output .npz file.")]
InputsN0Opt = Annotated[int, typer.Option("--inputs", callback=at_least(1), help="Input dimension n0.")]
FormsSeedOpt = Annotated[
    int, typer.Option(callback=at_least(0), help="Seed for the last layer's general-position forms.")
]


def _save(net, out: Path):
    from regioncount import save_model

    _check_build_out(out)
    save_model(net, out)
    print(f"wrote {out}")


def _check_build_out(out: Path, model: Path | None = None) -> None:
    """``build --out``: an .npz path that can be written and is not the input model."""
    if out.suffix != ".npz":
        fail(f"--out must end in .npz, got {out}", 2)
    guarded(lambda: checks.check_outputs({"--out": out}, {"MODEL": model}))


#: A build holds its arrays about three times at its peak (rows being stacked, the network, the .npz buffer).
BUILD_PEAK_FACTOR = 3


def _refuse_build_over_cap(floats: float, memory_cap: float, what: str) -> None:
    guarded(lambda: checks.refuse_over_cap(BUILD_PEAK_FACTOR * 8 * floats, memory_cap, what))


def _dense_floats(inputs: int, widths: list[int], outputs: int, k: int = 1) -> int:
    """Parameters of a dense network (weights and biases; ``k`` pieces per unit for Maxout)."""
    sizes = [inputs, *widths]
    return sum(k * (a + 1) * b for a, b in zip(sizes, sizes[1:])) + (sizes[-1] + 1) * outputs


#: No layer may be wider than this (a typo such as --widths 3200000 is refused before any work).
MAX_WIDTH = 1_000_000


def _widths(text: str) -> list[int]:
    w = parse_ints(text, "--widths")
    if min(w) < 1 or max(w) > MAX_WIDTH:
        fail(f"--widths must be integers from 1 to {MAX_WIDTH:,}, got {text}", 2)
    return w


@build_app.command("random-mlp")
def build_random_mlp(
    out: OutOpt,
    inputs: Annotated[int, typer.Option(callback=at_least(1), help="Input dimension q.")] = 2,
    widths: Annotated[str, typer.Option(help="Hidden widths, comma-separated, e.g. 32,32,32.")] = "32,32,32",
    outputs: Annotated[int, typer.Option(callback=at_least(1), help="Output dimension.")] = 1,
    init: Annotated[
        str,
        typer.Option(
            callback=one_of("torch", "normal"),
            help="torch: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) like nn.Linear; normal: He weights, N(0,1) biases.",
        ),
    ] = "torch",
    seed: Annotated[int, typer.Option(callback=at_least(0), help="Random seed.")] = 0,
    memory_cap: MemoryCapOpt = 4.0,
):
    """A seeded random ReLU MLP."""
    from regioncount import random_mlp

    w = _widths(widths)
    _check_build_out(out)
    _refuse_build_over_cap(_dense_floats(inputs, w, outputs), memory_cap, "this MLP")
    guarded(lambda: _save(random_mlp(inputs, w, outputs, seed=seed, init=init), out))


@build_app.command("random-maxout")
def build_random_maxout(
    out: OutOpt,
    inputs: Annotated[int, typer.Option(callback=at_least(1), help="Input dimension q.")] = 2,
    widths: Annotated[str, typer.Option(help="Widths (units per layer), comma-separated.")] = "8,8",
    k: Annotated[int, typer.Option(callback=at_least(2), help="Maxout rank (pieces per unit), at least 2.")] = 2,
    outputs: Annotated[int, typer.Option(callback=at_least(1), help="Output dimension.")] = 1,
    seed: Annotated[int, typer.Option(callback=at_least(0), help="Random seed.")] = 0,
    memory_cap: MemoryCapOpt = 4.0,
):
    """A seeded random Maxout network."""
    from regioncount import random_maxout

    w = _widths(widths)
    _check_build_out(out)
    _refuse_build_over_cap(_dense_floats(inputs, w, outputs, k), memory_cap, "this Maxout network")
    guarded(lambda: _save(random_maxout(inputs, w, k=k, output_dim=outputs, seed=seed), out))


@build_app.command("random-transformer")
def build_random_transformer(
    out: OutOpt,
    inputs: Annotated[int, typer.Option(callback=at_least(1), help="Input dimension q.")] = 2,
    tokens: Annotated[int, typer.Option(callback=at_least(1), help="Number of tokens T.")] = 4,
    d_model: Annotated[int, typer.Option(callback=at_least(1, MAX_WIDTH), help="Model width d.")] = 8,
    depth: Annotated[int, typer.Option(callback=at_least(1), help="Number of blocks (attention + FFN each).")] = 2,
    heads: Annotated[int, typer.Option(callback=at_least(1), help="Heads per block.")] = 1,
    d_ff: Annotated[
        int | None, typer.Option(callback=at_least(1, MAX_WIDTH), help="FFN width (default 2 d_model).")
    ] = None,
    attention: Annotated[
        str, typer.Option(callback=one_of("hardmax", "relu", "softmax"), help="hardmax, relu or softmax.")
    ] = "hardmax",
    causal: Annotated[bool, typer.Option(metavar="", help="Causal mask.")] = False,
    scale_by_t: Annotated[bool, typer.Option("--scale-by-t", metavar="", help="Divide ReLU attention by T.")] = False,
    inv_temperature: Annotated[
        float, typer.Option(callback=finite(0.0, open_min=True), help="Softmax inverse temperature lambda.")
    ] = 1.0,
    seed: Annotated[int, typer.Option(callback=at_least(0), help="Random seed.")] = 0,
    memory_cap: MemoryCapOpt = 4.0,
):
    """A seeded random Transformer (no layer norm)."""
    from regioncount import random_transformer

    if scale_by_t and attention != "relu":
        checks.not_applicable("--scale-by-t", f"it divides ReLU attention by T, and --attention is {attention}")
    if checks.explicit("inv_temperature") and attention != "softmax":
        checks.not_applicable("--inv-temperature", f"it sets softmax attention, and --attention is {attention}")
    _check_build_out(out)
    dh, ff = max(1, d_model // heads), d_ff or 2 * d_model
    per_block = 4 * heads * d_model * dh + 2 * d_model * ff + ff + d_model
    floats = depth * per_block + d_model * (inputs + tokens + 2)
    _refuse_build_over_cap(floats, memory_cap, "this Transformer")
    guarded(
        lambda: _save(
            random_transformer(
                inputs,
                tokens,
                d_model,
                depth,
                heads,
                d_ff=d_ff,
                attention=attention,
                causal=causal,
                scale_by_T=scale_by_t,
                inv_temperature=inv_temperature,
                seed=seed,
            ),
            out,
        )
    )


@build_app.command("fold-relu")
def build_fold_relu(
    out: OutOpt,
    widths: Annotated[
        str, typer.Option(help="Widths n_l >= 3, comma-separated: prod (n_l + 1) pieces on [0, 1].")
    ] = "4,4",
    memory_cap: MemoryCapOpt = 4.0,
):
    """The ReLU fold on R composed over layers: exactly prod (n_l + 1) pieces on [0, 1]."""
    from regioncount.theory import fold_relu_network

    w = _widths(widths)
    _construct(out, _dense_floats(1, w, 1), memory_cap, "this fold network", fold_relu_network, w)


@build_app.command("fold-maxout")
def build_fold_maxout(
    out: OutOpt,
    widths: Annotated[str, typer.Option(help="Units per layer, comma-separated (even when k >= 3).")] = "2,2",
    k: Annotated[int, typer.Option(callback=at_least(2), help="Maxout rank.")] = 3,
    memory_cap: MemoryCapOpt = 4.0,
):
    """The Maxout fold on R composed over layers: prod (n_l (k-1) + 1) pieces on [0, 1]."""
    from regioncount.theory import fold_maxout_network

    w = _widths(widths)
    _construct(out, _dense_floats(1, w, 1, k), memory_cap, "this fold network", fold_maxout_network, w, k)


@build_app.command("product-relu")
def build_product_relu(
    out: OutOpt,
    widths: Annotated[
        str, typer.Option(help="Widths, comma-separated; floor(n_l / n0) >= 3 for hidden layers.")
    ] = "6,3",
    n0: InputsN0Opt = 2,
    seed: FormsSeedOpt = 0,
    memory_cap: MemoryCapOpt = 4.0,
):
    """ReLU product construction in R^n0 attaining Serra et al.'s lower bound on [-1, 2]^n0."""
    from regioncount.theory import product_relu

    w = _widths(widths)
    _construct(out, _dense_floats(n0, w, 1), memory_cap, "this product network", product_relu, w, n0, seed=seed)


@build_app.command("product-maxout")
def build_product_maxout(
    out: OutOpt,
    widths: Annotated[str, typer.Option(help="Widths, comma-separated.")] = "4,2",
    n0: InputsN0Opt = 2,
    k: Annotated[int, typer.Option(callback=at_least(2), help="Maxout rank.")] = 3,
    seed: FormsSeedOpt = 0,
    memory_cap: MemoryCapOpt = 4.0,
):
    """Maxout product construction in R^n0 attaining the maxout lower bound on [-1, 2]^n0 (even floor(n_l/n0) or k = 2)."""
    from regioncount.theory import product_maxout

    w = _widths(widths)
    _construct(out, _dense_floats(n0, w, 1, k), memory_cap, "this product network", product_maxout, w, n0, k, seed=seed)


@build_app.command("compile")
def build_compile(
    model: Annotated[Path, typer.Argument(help="A Maxout model file (.npz).")],
    out: Annotated[Path, typer.Option(help="Output .npz file for the hardmax Transformer.")],
    box: Annotated[
        tuple[float, float],
        typer.Option(
            metavar="LO HI", callback=box_callback, help="LO HI: the box the compiled model must be exact on."
        ),
    ] = (-1.0, 2.0),
    layout: Annotated[
        str,
        typer.Option(
            callback=one_of("paper", "compact"),
            help="paper: 3 blocks per maxout layer (Thm 4.4's count); compact: L + 1 blocks.",
        ),
    ] = "paper",
    memory_cap: MemoryCapOpt = 4.0,
):
    """Compile a Maxout network into a hardmax Transformer that equals it on the box."""
    from regioncount import Maxout, ModelFileError, load_model
    from regioncount.theory import compile_maxout, compiled_nbytes

    _check_build_out(out, model)

    def run():
        net = load_model(model)
        if not isinstance(net, Maxout):
            raise ModelFileError(f"{model}: holds a {type(net).__name__}, compile takes a Maxout network")
        need = BUILD_PEAK_FACTOR * compiled_nbytes(net.widths, net.input_dim, net.k, layout)
        checks.refuse_over_cap(need, memory_cap, "the compiled Transformer")
        _save(compile_maxout(net, box[0], box[1], layout), out)

    guarded(run)


@build_app.command("bound-transformer")
def build_bound_transformer(
    out: OutOpt,
    m: Annotated[int, typer.Option("--m", callback=at_least(1), help="Per-token width m.")] = 1,
    tokens: Annotated[int, typer.Option("--tokens", callback=at_least(2), help="Tokens T (maxout rank).")] = 4,
    q: Annotated[int, typer.Option("--inputs", callback=at_least(1), help="Input dimension q.")] = 2,
    depth: Annotated[int, typer.Option("--depth", callback=at_least(3), help="Blocks D >= 3.")] = 9,
    layout: Annotated[
        str,
        typer.Option(callback=one_of("paper", "compact"), help="paper (D blocks) or compact (floor(D/3) + 1 blocks)."),
    ] = "paper",
    memory_cap: MemoryCapOpt = 4.0,
):
    """The hardmax Transformer attaining Thm 4.4 (Gu, Yang, Zhou 2026) on [-1, 2]^q where the construction can."""
    from regioncount.theory import bound_attaining_nbytes, bound_attaining_transformer

    _check_build_out(out)
    need = BUILD_PEAK_FACTOR * bound_attaining_nbytes(m, tokens, q, depth, layout)
    guarded(
        lambda: checks.refuse_over_cap(need, memory_cap, f"the Thm 4.4 construction (m={m}, T={tokens}, D={depth})")
    )

    def run():
        tf, info = _theory_call(bound_attaining_transformer, m, tokens, q, depth, layout)
        _save(tf, out)
        note = (
            "" if info["attainable"] else " (floor(mT/q) odd with T >= 3: this construction falls short of the bound)"
        )
        print(f"Thm 4.4 bound {info['bound']:,}; this construction has {info['construction_regions']:,} regions{note}")

    guarded(run)


def _construct(out: Path, floats: int, memory_cap: float, what: str, fn, *args, **kwargs) -> None:
    """A construction of the theory: check --out and --memory-cap, then build ``fn(*args, **kwargs)`` and save it."""
    _check_build_out(out)
    _refuse_build_over_cap(floats, memory_cap, what)
    guarded(lambda: _save(_theory_call(fn, *args, **kwargs), out))


def _theory_call(fn, *args, **kwargs):
    """Call a construction; its ValueErrors (parameters outside the construction's range) are usage errors."""
    try:
        return fn(*args, **kwargs)
    except RegionCountError:
        raise
    except ValueError as e:
        raise checks.UsageError(str(e)) from None
