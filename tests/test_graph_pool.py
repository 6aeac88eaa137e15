"""The instance pool of the CUDA-graph path (semiseg/crf/kernels/graphs.py), without CUDA:
holding, release when `saved` is dropped, reuse, eviction of the least recently used idle
instance, and refusal when every instance is held."""

import gc

import pytest

pytest.importorskip("triton")

from semiseg.crf.kernels import graphs


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


def test_every_kernel_setting_is_part_of_the_graph_key():
    """A captured graph is replayed only under the module settings it was captured with
    (kernels._knobs is part of its key): every launch setting of semiseg.crf.kernels (an
    upper-case int, bool or None) must be in _knobs, or a benchmark or test that changes
    it replays a graph of the other code path. MAX_RING / MAX_RING_TILED are input
    limits checked before any launch, not launch settings."""
    from semiseg.crf import kernels as kn

    keyed = set(kn._knobs.__code__.co_names)
    settings = {n for n, v in vars(kn).items()
                if n.isupper() and isinstance(v, (int, bool, type(None)))}
    assert settings - keyed - {"MAX_RING", "MAX_RING_TILED"} == set()
    assert keyed <= settings | {"SPARSE_BELOW"}
