"""The op protocol (regioncount.engines._protocol): one support table, one kernel per supported op and engine."""

import dataclasses
import typing

import numpy as np
import pytest

from regioncount import Box, Segment
from regioncount.engines import _protocol as pr
from regioncount.networks import Program, _ops, random_transformer
from regioncount.networks._ops import Affine, Attention, GroupMax, ReLU, Residual


def _op_classes():
    """Every op dataclass defined in _ops (a Program and its CodeMap are not ops: ops state their facts)."""
    return {
        c
        for c in vars(_ops).values()
        if isinstance(c, type)
        and dataclasses.is_dataclass(c)
        and c.__module__ == _ops.__name__
        and issubclass(c, _ops._Facts)
    }


def test_every_op_type_is_in_the_vocabulary():
    assert _op_classes() == set(typing.get_args(_ops.Op))
    keys = set(pr.all_keys())
    assert len(keys) == len(_op_classes()) - 1 + len(_ops.SIGMAS)
    with pytest.raises(KeyError, match="not op keys"):
        pr._row({"attention/tanh": pr.Refusal(pr.NotPiecewiseError, "")})


def test_keys_of_ops():
    att = dict(Wq=np.zeros((1, 2, 1)), Wk=np.zeros((1, 2, 1)), Wv=np.zeros((1, 2, 1)), Wo=np.zeros((1, 1, 2)))
    got = [pr.op_key(op) for op in (Affine(np.eye(2), np.zeros(2)), ReLU(), GroupMax(2), Residual(()))]
    assert got == ["affine", "relu", "groupmax", "residual"]
    assert [pr.op_key(Attention(**att, sigma=s)) for s in _ops.SIGMAS] == [f"attention/{s}" for s in _ops.SIGMAS]


@pytest.mark.parametrize("engine", sorted(pr.MODULES))
def test_each_engine_has_a_kernel_for_every_op_it_supports_and_none_it_refuses(engine):
    kernels = pr.kernels_of(engine)
    assert kernels.missing() == []
    supported = {k for k, r in pr.SUPPORT[engine].items() if r is None}
    assert set(kernels.table) | set(kernels.structural) == supported
    # only structure is applied without a kernel, and piecewise-linear ops, which lowering rewrites exactly
    assert set(kernels.structural) <= {"residual", "piecewiselinear"}


def test_a_missing_kernel_is_reported_and_a_refused_op_cannot_get_one():
    partial = pr.Kernels("plane")  # not the engine's registry: a stand-in with one kernel left out
    for key in pr.all_keys():
        if key not in ("groupmax", "piecewiselinear") and pr.SUPPORT["plane"][key] is None:
            partial.register(key)(lambda *a: None)
    assert partial.missing() == ["groupmax"]
    with pytest.raises(TypeError, match="no kernel for 'groupmax'"):
        partial.lookup(GroupMax(2))
    with pytest.raises(ValueError, match="refuses 'attention/softmax'"):
        partial.register("attention/softmax")(lambda *a: None)
    with pytest.raises(ValueError, match="two kernels"):
        partial.register("relu")(lambda *a: None)
    with pytest.raises(KeyError):
        partial.register("conv")(lambda *a: None)


def _run(engine, sigma):
    if engine in ("exact", "float"):  # the interpreter of codes refuses when it flattens the program
        from regioncount.networks import lower
        from regioncount.networks._interpret import ExactProgram, float_maps

        program = lower(random_transformer(2, tokens=2, d_model=4, depth=1, attention=sigma, seed=1))
        if engine == "exact":
            ExactProgram.of_domain(program, np.zeros(2), np.eye(2))
        else:
            float_maps(program, np.zeros((1, 0), np.int64), np.zeros(2), np.eye(2))
    elif engine == "plane":
        from regioncount.engines._plane import partition_plane

        partition_plane(random_transformer(2, tokens=2, d_model=4, depth=1, attention=sigma, seed=1), Box(-1, 1, 2))
    elif engine == "curved":
        from regioncount.engines._curved import partition_curved

        partition_curved(random_transformer(2, tokens=2, d_model=4, depth=1, attention=sigma, seed=1), Box(-1, 1, 2))
    elif engine == "line":
        from regioncount.engines._line import walk_line

        net = random_transformer(2, tokens=2, d_model=4, depth=1, attention=sigma, seed=1)
        walk_line(net, Segment(np.array([-1.0, 0.0]), np.array([1.0, 0.5])))
    else:
        from regioncount.engines._space import partition_space

        partition_space(random_transformer(3, tokens=2, d_model=4, depth=1, attention=sigma, seed=1), Box(-1, 1, 3))


REFUSALS = [(e, k) for e, row in sorted(pr.SUPPORT.items()) if e in pr.MODULES for k, r in row.items() if r is not None]


def test_every_row_is_an_engine_or_a_consumer():
    assert set(pr.SUPPORT) == set(pr.MODULES) | set(pr.CONSUMERS)
    assert not set(pr.MODULES) & set(pr.CONSUMERS)


@pytest.mark.parametrize("consumer", sorted(pr.CONSUMERS))
def test_every_consumer_has_its_interpretations_kernels_for_every_op_it_supports(consumer):
    # a consumer (line exact walk, space exact, whole plane, certificate, retrieval, linear regions) runs on
    # the interpreter of codes: each key it supports needs a kernel in every interpretation it relies on, so a
    # new op fails here until those kernels exist or the consumer's row refuses it
    for key, refusal in pr.SUPPORT[consumer].items():
        if refusal is not None:
            continue
        for interp in pr.CONSUMERS[consumer]:
            kernels = pr.kernels_of(interp)
            assert key in kernels.table or key in kernels.structural, (consumer, key, interp)


def test_a_new_op_key_without_kernels_fails_the_consumer_check():
    # what the consumer test sees when the vocabulary grows by an op no interpretation has a kernel for
    row = dict(pr.SUPPORT["certificate"])
    row["leakyrelu"] = None
    structural = pr.kernels_of("exact").structural
    missing = [k for k, r in row.items() if r is None and k not in pr.kernels_of("exact").table and k not in structural]
    assert missing == ["leakyrelu"]


def test_consumers_refuse_before_work():
    from regioncount import Box, RegionCountError, count_regions
    from regioncount.engines._whole_plane import whole_plane_box

    net = random_transformer(2, tokens=2, d_model=4, depth=1, seed=1)
    with pytest.raises(RegionCountError, match="whole-plane covers ReLU MLPs"):
        whole_plane_box(net)
    cert = count_regions(net, Box(-1, 1, 2), method="exact", certify=True)["certificate"]
    assert cert["checks"]["halfplanes"]["passed"] is None


@pytest.mark.parametrize("engine,key", REFUSALS, ids=[f"{e}-{k}" for e, k in REFUSALS])
def test_each_refusal_is_what_the_engine_raises(engine, key):
    refusal = pr.SUPPORT[engine][key]
    assert key.startswith("attention/")  # the only refusals today; a new one needs a network here
    with pytest.raises(refusal.error) as info:
        _run(engine, key.split("/")[1])
    assert str(info.value) == refusal.message


def test_ops_state_their_facts_validated_and_frozen_at_construction():
    W = np.array([[1.0, 2.0], [3.0, 4.0]])
    op = Affine(W, np.zeros(2))
    W[0, 0] = 9.0  # the caller's array changes; the op's copy does not
    assert op.W[0, 0] == 1.0 and not op.W.flags.writeable
    with pytest.raises(ValueError, match="do not fit"):
        Affine(np.zeros((2, 3)), np.zeros(4))
    with pytest.raises(ValueError, match="positive integer rank"):
        GroupMax(0)
    with pytest.raises(ValueError, match="sigma must be one of"):
        Attention(np.zeros((1, 2, 1)), np.zeros((1, 2, 1)), np.zeros((1, 2, 1)), np.zeros((1, 1, 2)), sigma="tanh")
    with pytest.raises(ValueError, match="affine expects width 3"):
        Program(1, 2, (Affine(np.zeros((4, 3)), np.zeros(4)),))  # widths are checked when the program is built
    facts = {
        "relu": (ReLU(), "bits", 2 * 5, 1),
        "groupmax": (GroupMax(3), "argmax", 2 * 2, 2),
        "affine": (Affine(np.zeros((6, 6)), np.zeros(6)), "nothing", 0, 0),
    }
    for key, (o, records, n, digit) in facts.items():
        width = 6 if key == "groupmax" else 5 if key == "relu" else 6
        assert (o.key, o.records, o.code_length(width, 2), o.digit_max(2)) == (key, records, n, digit)
    att = dict(Wq=np.zeros((2, 4, 1)), Wk=np.zeros((2, 4, 1)), Wv=np.zeros((2, 4, 3)), Wo=np.zeros((2, 3, 4)))
    got = {
        s: (a.records, a.code_length(4, 3), a.digit_max(3), a.degree, a.smooth)
        for s in _ops.SIGMAS
        for a in [Attention(**att, sigma=s)]
    }
    assert got == {
        "hardmax": ("argmax", 6, 2, 1, False),
        "relu": ("bits", 18, 1, 3, False),
        "softmax": ("nothing", 0, 0, 1, True),
    }


def test_the_unsafe_fall_throughs_raise():
    class NotAnOp:
        pass

    with pytest.raises(TypeError):
        _ops.op_code_length(NotAnOp(), 3, 1)
    with pytest.raises(TypeError):
        pr.op_key(NotAnOp())
    with pytest.raises(TypeError):
        Program(1, 2, (NotAnOp(),))


def test_live_entries_follow_what_each_op_reads():
    """The entries of each op's output that something after it reads: the program's output is row ``out_token``;
    an affine map reads, per live token, the columns with a nonzero weight in a live row; a residual reads what
    is read of its output and what its body reads; an op that decides (ReLU) reads every entry it takes in."""
    W0 = np.ones((3, 2))
    Wu = np.array([[1.0, 0, 0], [0, 0, 1.0]])  # reads columns 0 and 2
    Wd = np.array([[0, 0.0], [2.0, 0], [0, 3.0]])  # column 1 of the stream from unit 0, column 2 from unit 1
    Wf = np.array([[0, 1.0, 0]])  # the output reads column 1 of the stream
    first, up, relu, down = Affine(W0, np.zeros(3)), Affine(Wu, np.zeros(2)), ReLU(), Affine(Wd, np.zeros(3))
    final = Affine(Wf, np.zeros(1))
    res = Residual((up, relu, down))
    live = _ops.live_entries(Program(2, 2, (first, res, final), out_token=1))
    np.testing.assert_array_equal(live[id(final)], [[False], [True]])
    np.testing.assert_array_equal(live[id(res)], [[False] * 3, [False, True, False]])
    np.testing.assert_array_equal(live[id(down)], live[id(res)])  # the body's output is added to what is read
    np.testing.assert_array_equal(live[id(relu)], [[False, False], [True, False]])  # row 1 of Wd reads unit 0
    assert live[id(up)].all()  # the ReLU decides on every unit of every token
    # the residual reads columns 0 and 2 of both tokens (through Wu) and column 1 of the output token
    np.testing.assert_array_equal(live[id(first)], [[True, False, True], [True, True, True]])
    # the default: an op that decides reads all of its input, whatever is read of its output
    assert ReLU().reads(np.zeros((2, 3), bool), 3).all()
    np.testing.assert_array_equal(up.reads(np.array([[True, False], [False, False]]), 3), [[1, 0, 0], [0, 0, 0]])
