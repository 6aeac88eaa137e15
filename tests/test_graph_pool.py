"""The instance pool of the CUDA-graph path (semiseg/crf/triton/graphs.py), without CUDA:
holding, release when `saved` is dropped, reuse, eviction of the least recently used idle
instance, and refusal when every instance is held."""

import gc

import pytest

pytest.importorskip("triton")

from semiseg.crf.triton import graphs


class Inst:
    held = False


def test_held_instances_are_not_shared_and_come_back_when_saved_is_dropped():
    pool = graphs._Pool(limit=2)
    made = []

    def make():
        made.append(Inst())
        return made[-1]

    a = pool.acquire("k", make)
    b = pool.acquire("k", make)
    assert a is not b and len(made) == 2
    assert pool.acquire("k", make) is None  # both held, no room
    pool.release(a)
    assert pool.acquire("k", make) is a
    pool.release(a)
    pool.release(b)
    # a third key evicts the least recently used idle instance of "k"
    c = pool.acquire("j", make)
    assert c is made[-1] and len(pool) == 2


def test_saved_releases_its_instance_when_collected():
    pool = graphs._Pool(limit=1)
    old = graphs.POOL
    graphs.POOL = pool
    try:
        inst = pool.acquire("k", Inst)
        saved = graphs.Saved(inst)
        assert pool.acquire("k", Inst) is None
        del saved
        gc.collect()
        assert not inst.held
        assert pool.acquire("k", Inst) is inst
    finally:
        graphs.POOL = old


def test_a_key_is_graphed_only_from_its_second_call():
    seen = graphs._Seen(limit=2)
    assert not seen.again("a")
    assert seen.again("a")
    assert not seen.again("b")
    assert not seen.again("c")  # "a" is now the oldest of three: forgotten
    assert not seen.again("a")
    assert seen.again("c")


def test_no_launch_setting_is_a_module_global():
    """A captured graph is replayed only under the Tuning it was captured with (the Tuning
    object is part of its key, graphs.py), so every launch setting must live in Tuning:
    no module of semiseg.crf.triton may hold an upper-case int, float, bool or None global
    a benchmark could assign (MAX_RING / MAX_RING_TILED are input limits checked before
    any launch; graphs' ENABLED / MAX_ELEMENTS / MAX_INSTANCES size the graph cache), and
    two Tunings that differ in any one field are different keys."""
    import dataclasses
    import importlib
    import pkgutil

    from semiseg.crf import triton as kn

    allowed = {"MAX_RING", "MAX_RING_TILED", "ENABLED", "MAX_ELEMENTS", "MAX_INSTANCES"}
    found = {}
    for info in pkgutil.walk_packages(kn.__path__, kn.__name__ + "."):
        mod = importlib.import_module(info.name)
        for n, v in vars(mod).items():
            if n.isupper() and isinstance(v, (int, float, bool, type(None))) and n not in allowed:
                found[f"{info.name}.{n}"] = v
    assert not found
    base = kn.Tuning()
    for f in dataclasses.fields(kn.Tuning):
        v = getattr(base, f.name)
        other = dataclasses.replace(base, **{f.name: (not v) if isinstance(v, bool) else
                                              1 if v is None else v + 1})
        assert other != base and hash(other) != hash(base), f.name
        assert {base: 0}.get(other) is None, f.name


def test_tuning_from_the_environment():
    """SEMISEG_TRITON_TUNING's "field=value,..." (Tuning.from_env): ints, floats,
    true/false/none, names in any case; an unknown field is an error naming it."""
    from semiseg.crf.triton import Tuning

    t = Tuning.from_env("warps=8, sparse_below=0.5,END_TAG=false,rev_split=none,segment=3")
    assert (t.warps, t.sparse_below, t.end_tag, t.rev_split, t.segment) == (8, 0.5, False,
                                                                            None, 3)
    assert Tuning.from_env("") == Tuning() == Tuning.from_env(None)
    with pytest.raises(ValueError, match="'nope'"):
        Tuning.from_env("nope=1")
