"""Property tests: random JSON states, random draft mutations, random parallel tools.

The draft is checked against plain Python doing the same operations on a plain copy
(model-based), and the tracker's step writes and RFC 6902 patches against that result.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helix_dbos.state import (
    StateTracker,
    StepWrites,
    apply_rfc6902,
    apply_step_writes,
    merge_step_writes,
    step_writes_to_rfc6902,
)

SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Keys exercise JSON-pointer escaping ("/", "~", "", "-", "0") but never spell a dict method name.
KEYS = st.text(alphabet="ab/~-0", max_size=2)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=2)
)
VALUES = st.recursive(
    SCALARS, lambda children: st.lists(children, max_size=3) | st.dictionaries(KEYS, children, max_size=3), max_leaves=8
)
STATES = st.dictionaries(KEYS, VALUES, max_size=4)

Op = tuple[Any, ...]
Path = tuple[Any, ...]


def canon(value: Any) -> str:
    """A JSON text that tells ``1``, ``1.0``, ``True`` and ``-0.0`` apart."""
    return json.dumps(value, sort_keys=True)


def container_paths(value: Any, path: Path = ()) -> Iterator[Path]:
    if isinstance(value, dict):
        yield path
        for key, child in value.items():
            yield from container_paths(child, (*path, key))
    elif isinstance(value, list):
        yield path
        for index, child in enumerate(value):
            yield from container_paths(child, (*path, index))


def navigate(value: Any, path: Path) -> Any:
    for key in path:
        value = value[key]
    return value


def perform(target: Any, op: Op) -> None:
    """One operation, written the same for a plain dict/list and for a draft."""
    kind, *args = op
    if kind == "set":
        target[args[0]] = args[1]
    elif kind == "del":
        del target[args[0]]
    elif kind == "pop":
        target.pop(*args)
    elif kind == "setdefault":
        target.setdefault(args[0], args[1])
    elif kind == "update":
        target.update(args[0])
    elif kind == "clear":
        target.clear()
    elif kind == "iadd_member":
        target[args[0]] += args[1]
    elif kind == "append":
        target.append(args[0])
    elif kind == "extend":
        target.extend(args[0])
    elif kind == "iadd":
        alias = target
        alias += args[0]
    elif kind == "insert":
        target.insert(args[0], args[1])
    elif kind == "set_slice":
        target[args[0] : args[1]] = args[2]
    elif kind == "del_slice":
        del target[args[0] : args[1]]
    elif kind == "remove":
        target.remove(args[0])
    elif kind == "reverse":
        target.reverse()
    elif kind == "sort":
        target.sort(reverse=args[0])
    else:
        raise AssertionError(kind)


def draw_dict_op(data: st.DataObject, target: dict[str, Any]) -> Op:
    kinds = ["set", "setdefault", "update", "clear"]
    if target:
        kinds += ["set_existing", "del", "pop"]
    if any(isinstance(value, list) for value in target.values()):
        kinds.append("iadd_member")
    kind = data.draw(st.sampled_from(kinds))
    if kind in ("set", "setdefault"):
        return (kind, data.draw(KEYS), data.draw(VALUES))
    if kind == "set_existing":
        return ("set", data.draw(st.sampled_from(sorted(target))), data.draw(VALUES))
    if kind == "update":
        return ("update", data.draw(st.dictionaries(KEYS, VALUES, max_size=2)))
    if kind in ("del", "pop"):
        return (kind, data.draw(st.sampled_from(sorted(target))))
    if kind == "iadd_member":
        key = data.draw(st.sampled_from(sorted(k for k, v in target.items() if isinstance(v, list))))
        return ("iadd_member", key, data.draw(st.lists(VALUES, max_size=2)))
    return ("clear",)


def _sortable(target: list[Any]) -> bool:
    try:
        sorted(copy.deepcopy(target))
    except TypeError:
        return False
    return True


def draw_list_op(data: st.DataObject, target: list[Any]) -> Op:
    size = len(target)
    kinds = ["append", "extend", "iadd", "insert", "set_slice", "clear", "reverse"]
    if size:
        kinds += ["set", "del", "pop", "remove", "del_slice"]
    if _sortable(target):
        kinds.append("sort")
    if any(isinstance(value, list) for value in target):
        kinds.append("iadd_member")
    kind = data.draw(st.sampled_from(kinds))
    index = st.integers(-size, size - 1) if size else st.just(0)
    bound = st.integers(-size - 1, size + 1)
    if kind == "append":
        return ("append", data.draw(VALUES))
    if kind in ("extend", "iadd"):
        return (kind, data.draw(st.lists(VALUES, max_size=3)))
    if kind == "insert":
        return ("insert", data.draw(bound), data.draw(VALUES))
    if kind == "set_slice":
        return ("set_slice", data.draw(bound), data.draw(bound), data.draw(st.lists(VALUES, max_size=3)))
    if kind == "del_slice":
        return ("del_slice", data.draw(bound), data.draw(bound))
    if kind in ("set",):
        return ("set", data.draw(index), data.draw(VALUES))
    if kind == "del":
        return ("del", data.draw(index))
    if kind == "pop":
        return ("pop", data.draw(index))
    if kind == "remove":
        return ("remove", copy.deepcopy(target[data.draw(index)]))
    if kind == "sort":
        return ("sort", data.draw(st.booleans()))
    if kind == "iadd_member":
        position = data.draw(st.sampled_from([i for i, value in enumerate(target) if isinstance(value, list)]))
        return ("iadd_member", position, data.draw(st.lists(VALUES, max_size=2)))
    return (kind,)


def draw_ops(data: st.DataObject, reference: dict[str, Any], max_ops: int = 5) -> list[tuple[Path, Op]]:
    """Draw operations and apply them to ``reference`` as they are drawn."""
    ops: list[tuple[Path, Op]] = []
    for _ in range(data.draw(st.integers(1, max_ops))):
        path = data.draw(st.sampled_from(list(container_paths(reference))))
        target = navigate(reference, path)
        op = draw_dict_op(data, target) if isinstance(target, dict) else draw_list_op(data, target)
        perform(target, copy.deepcopy(op))
        ops.append((path, op))
    return ops


def run_ops(tracker: StateTracker, ops: list[tuple[Path, Op]]) -> None:
    def change(draft: Any) -> None:
        for path, op in ops:
            perform(navigate(draft, path), op)

    tracker.update(change)


def check_writes(writes: StepWrites, before: dict[str, Any], after: dict[str, Any]) -> None:
    assert canon(apply_step_writes(before, writes)) == canon(after)
    assert canon(apply_rfc6902(before, step_writes_to_rfc6902(writes))) == canon(after)


# --- one tracker ----------------------------------------------------------------------


@SETTINGS
@given(data=st.data(), initial=STATES, delta=st.booleans())
def test_writes_and_patches_reproduce_every_update(data: st.DataObject, initial: dict[str, Any], delta: bool) -> None:
    tracker = StateTracker(initial, array_delta_mode=delta)
    reference = copy.deepcopy(initial)
    before = copy.deepcopy(initial)
    for _ in range(data.draw(st.integers(1, 3))):
        run_ops(tracker, draw_ops(data, reference))

        assert canon(tracker.get_state().dump()) == canon(reference)
        writes = tracker.get_step_writes()
        check_writes(writes, before, reference)
        assert json.loads(json.dumps(writes)) == writes
        top_level_keys = [write["path"][0] for write in writes]
        assert len(set(top_level_keys)) == len(top_level_keys)
        if data.draw(st.booleans()):
            tracker.reset_tracking()
            before = copy.deepcopy(reference)


@SETTINGS
@given(data=st.data(), initial=STATES, delta=st.booleans())
def test_failed_updates_change_nothing(data: st.DataObject, initial: dict[str, Any], delta: bool) -> None:
    tracker = StateTracker(initial, array_delta_mode=delta)
    ops = draw_ops(data, copy.deepcopy(initial))

    def change(draft: Any) -> None:
        for path, op in ops:
            perform(navigate(draft, path), op)
        raise KeyboardInterrupt  # even a BaseException aborts the update

    with contextlib.suppress(KeyboardInterrupt):
        tracker.update(change)

    assert canon(tracker.get_state().dump()) == canon(initial)
    assert tracker.get_step_writes() == []


@SETTINGS
@given(
    initial=st.lists(VALUES, max_size=5),
    batches=st.lists(st.lists(VALUES, max_size=3), min_size=1, max_size=4),
    nested=st.booleans(),
)
def test_in_place_appends_are_one_append_write_in_delta_mode(
    initial: list[Any], batches: list[list[Any]], nested: bool
) -> None:
    state: dict[str, Any] = {"wrap": {"xs": initial}} if nested else {"xs": initial}
    tracker = StateTracker(state, array_delta_mode=True)
    path = ["wrap", "xs"] if nested else ["xs"]
    for batch in batches:
        tracker.update(lambda draft, batch=batch: navigate(draft, tuple(path)).extend(batch))

    appended = [item for batch in batches for item in batch]
    expected = [{"op": "append", "path": path, "values": appended}] if appended else []
    assert canon(tracker.get_step_writes()) == canon(expected)


# --- several tools ----------------------------------------------------------------------


@SETTINGS
@given(
    base_lists=st.lists(st.lists(SCALARS, max_size=3), min_size=1, max_size=3),
    tools=st.lists(
        st.tuples(st.lists(st.tuples(st.integers(0, 2), VALUES), max_size=4), st.booleans()),
        min_size=1,
        max_size=4,
    ),
)
def test_parallel_appends_all_survive_and_replaces_are_last_writer_wins(
    base_lists: list[list[Any]], tools: list[tuple[list[tuple[int, Any]], bool]]
) -> None:
    base: dict[str, Any] = {f"list{i}": items for i, items in enumerate(base_lists)}
    base["count"] = -1
    all_writes = []
    for number, (appends, sets_count) in enumerate(tools):
        tracker = StateTracker(base, array_delta_mode=True)

        def change(draft: Any, appends: Any = appends, sets_count: bool = sets_count, number: int = number) -> None:
            for which, item in appends:
                draft[f"list{which % len(base_lists)}"].append(item)
            if sets_count:
                draft.count = number

        tracker.update(change)
        all_writes.append(tracker.get_step_writes())

    merged = merge_step_writes(all_writes)
    result = apply_step_writes(base, merged)

    for i, items in enumerate(base_lists):
        appended = [item for appends, _ in tools for which, item in appends if which % len(base_lists) == i]
        assert canon(result[f"list{i}"]) == canon(items + appended)
    setters = [number for number, (_, sets_count) in enumerate(tools) if sets_count]
    assert result["count"] == (setters[-1] if setters else -1)
    assert canon(apply_rfc6902(base, step_writes_to_rfc6902(merged))) == canon(result)


@SETTINGS
@given(data=st.data(), base=STATES, tool_count=st.integers(2, 4))
def test_parallel_random_tools_merge_into_valid_writes(
    data: st.DataObject, base: dict[str, Any], tool_count: int
) -> None:
    afters, all_writes = [], []
    for _ in range(tool_count):
        tracker = StateTracker(base, array_delta_mode=True)
        reference = copy.deepcopy(base)
        run_ops(tracker, draw_ops(data, reference, max_ops=3))
        afters.append(reference)
        all_writes.append(tracker.get_step_writes())

    merged = merge_step_writes(all_writes)
    result = apply_step_writes(base, merged)

    assert canon(apply_rfc6902(base, step_writes_to_rfc6902(merged))) == canon(result)
    for key in set(base) | {k for after in afters for k in after}:
        writers = [n for n, writes in enumerate(all_writes) if any(w["path"][0] == key for w in writes)]
        if not writers:
            assert canon(result.get(key)) == canon(base.get(key))
        elif len(writers) == 1:
            assert canon(result.get(key)) == canon(afters[writers[0]].get(key))


@SETTINGS
@given(data=st.data(), base=STATES, delta=st.booleans(), tool_count=st.integers(1, 4))
def test_merging_sequential_writes_accumulates_them(
    data: st.DataObject, base: dict[str, Any], delta: bool, tool_count: int
) -> None:
    """As the runtime accumulates a step: each tool starts from the state the earlier ones made."""
    state = copy.deepcopy(base)
    accumulated: StepWrites = []
    for _ in range(tool_count):
        tracker = StateTracker(state, array_delta_mode=delta)
        run_ops(tracker, draw_ops(data, state, max_ops=3))
        accumulated = merge_step_writes([accumulated, tracker.get_step_writes()])

    check_writes(accumulated, base, state)
