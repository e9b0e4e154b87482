"""The shipper's own bookkeeping (`node.shipper`): batches PutLogEvents takes, and a state file it can always
start from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lifeguard.node.shipper import EVENT_OVERHEAD_BYTES, MAX_BATCH_BYTES, MAX_BATCH_EVENTS, _batches, _State


def test_batches_keep_the_order_and_within_putlogevents_count_and_bytes() -> None:
    """A report's escaped log tail can be six times its 4 KiB: eighty such reports are more than the
    1 MiB a PutLogEvents batch may hold, and a batch CloudWatch refuses would be refused forever."""
    big = ["\\u0001" * 4096 + f"#{n}" for n in range(80)]
    small = [f"report {n}" for n in range(2500)]
    for messages in (big, small, big + small):
        batches = list(_batches(messages))
        assert [m for batch in batches for m in batch] == messages
        assert all(len(batch) <= MAX_BATCH_EVENTS for batch in batches)
        assert all(
            sum(len(m.encode()) + EVENT_OVERHEAD_BYTES for m in batch) <= MAX_BATCH_BYTES for batch in batches
        )
    assert len(list(_batches(big))) == 2
    assert list(_batches([])) == []


@pytest.mark.parametrize(
    "damage",
    [
        '{"executor_offset": "x"}',
        '{"script_offsets": []}',
        "[]",
        '{"executor_offset": 0, "script_offsets": {}, "boot": Infinity, "first_boot": true, "pending": []}',
        '{"executor_offset": -5, "script_offsets": {}, "boot": 1, "first_boot": true, "pending": []}',
        '{"executor_offset": 0, "script_offsets": {"a": 1.5}, "boot": 1, "first_boot": true, "pending": []}',
        '{"executor_offset": 0, "script_offsets": {}, "boot": 1, "first_boot": true, "pending": 5}',
        '{"executor_offset": 0, "script_offsets": {}, "boot": 1, "first_boot": "yes", "pending": []}',
        '{"executor_offset": 0, "script_offsets": {}, "boot": 1, "first_boot": true, "pending": [1]}',
        "not json",
    ],
)
def test_a_damaged_state_file_is_started_afresh_not_a_shipper_stopped_for_good(
    tmp_path: Path, damage: str
) -> None:
    path = tmp_path / "shipper-state.json"
    path.write_text(damage)
    assert _State.load(path) == _State()


def test_a_state_as_saved_is_loaded_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "shipper-state.json"
    saved = _State(executor_offset=120, script_offsets={"a.log": 7}, boot=3, first_boot=False, pending=["r"])
    saved.save(path)
    assert json.loads(path.read_text())["boot"] == 3
    assert _State.load(path) == saved
