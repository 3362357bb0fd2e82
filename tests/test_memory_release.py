"""A model's release collects only what the attempt made: the process's earlier objects are frozen out of it."""

from __future__ import annotations

import gc
import weakref

from auditor.core.devices import collecting_only_new_objects, release_accelerator_memory


class Node:
    """An object in a reference cycle: only a garbage collection frees it."""

    def __init__(self):
        self.me = self


def cycle() -> weakref.ref:
    return weakref.ref(Node())


def test_within_an_attempt_a_release_frees_its_cycles_and_walks_only_new_objects():
    gc.collect()
    garbage_before = cycle()  # an earlier attempt's model a traceback held: collected as the scope begins
    held = Node()  # alive when the scope begins: frozen
    held_before = weakref.ref(held)
    with collecting_only_new_objects():
        assert garbage_before() is None
        assert gc.get_freeze_count() > 1000  # the imported libraries, tests and all
        during = cycle()
        del held  # garbage now, but among the frozen objects
        release_accelerator_memory()
        assert during() is None  # what the attempt made is collected
        assert held_before() is not None  # what came before was not walked
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert held_before() is None  # after the scope, collected as ever


def test_nested_scopes_unfreeze_at_the_outermost_end():
    """A batch's attempt holds its audits' attempts: the inner scope freezes nothing more, and its end leaves the
    batch's scope frozen. (Frozen objects nothing refers to any more are freed meanwhile: the count only falls.)"""
    with collecting_only_new_objects():
        frozen = gc.get_freeze_count()
        made_between = [{} for _ in range(10_000)]
        with collecting_only_new_objects():
            assert 1000 < gc.get_freeze_count() <= frozen  # not the 10,000 dicts made since the outer scope began
        assert 1000 < gc.get_freeze_count() <= frozen
        del made_between
    assert gc.get_freeze_count() == 0


def test_a_host_that_froze_objects_itself_keeps_them_frozen():
    """One frozen generation: a scope that froze and thawed in a host's process that had frozen objects itself
    would thaw the host's too. It leaves them as they are and freezes nothing."""
    gc.collect()
    gc.freeze()  # the host's own
    try:
        hosts = gc.get_freeze_count()
        with collecting_only_new_objects():
            during = cycle()
            release_accelerator_memory()
            assert during() is None  # releases still collect
        assert gc.get_freeze_count() >= hosts - 100  # still frozen (a few freed meanwhile at most)
    finally:
        gc.unfreeze()


def test_an_audits_stages_run_with_the_processs_earlier_objects_frozen(tiny_models, tmp_path):
    """The scope is the attempt's (held with its run folder's lock): frozen while stages run, thawed when it ends."""
    from auditor.core.cache import ContentCache
    from auditor.core.store import RunStore
    from auditor.studies.progress import QuietProgress
    from auditor.studies.prompt_audit import start_audit
    from tests.test_prompt_audit import tiny_options

    frozen: dict[str, int] = {}

    class Watch(QuietProgress):
        def start(self, stage: str, total: int | None, description: str) -> None:
            frozen[stage] = gc.get_freeze_count()

    cache = ContentCache(tmp_path / "cache.sqlite")
    try:
        record = start_audit(tiny_options(tiny_models), RunStore(tmp_path / "runs"), cache, Watch(), "r").run()
    finally:
        cache.close()
    assert record.status == "completed"
    assert {"generate", "perceive"} <= frozen.keys() and all(count > 1000 for count in frozen.values())
    assert gc.get_freeze_count() == 0
