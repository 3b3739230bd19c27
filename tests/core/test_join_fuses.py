"""Which joins get a fuse, and where."""

from __future__ import annotations

import pytest

from dataflow_operator.core.fuse import JoinFuses, join_fuses


@pytest.mark.parametrize("join_type", ["Inner", "Cross", "LeftOuter", "RightOuter", "FullOuter"])
def test_joins_that_can_multiply_rows_get_a_fuse_after_them_even_with_equality_keys(
    join_type: str,
) -> None:
    assert join_fuses(join_type, has_equality_keys=True) == JoinFuses(output=True, inputs=False)


@pytest.mark.parametrize("join_type", ["Inner", "Cross", "LeftOuter", "FullOuter"])
def test_nested_loop_joins_get_a_fuse_after_each_input_as_well(join_type: str) -> None:
    assert join_fuses(join_type, has_equality_keys=False) == JoinFuses(output=True, inputs=True)


@pytest.mark.parametrize("join_type", ["LeftSemi", "LeftAnti", "ExistenceJoin(exists#7)"])
def test_filtering_joins_do_not_multiply_but_their_nested_loops_are_fused_on_input(
    join_type: str,
) -> None:
    assert join_fuses(join_type, has_equality_keys=True) == JoinFuses(output=False, inputs=False)
    assert join_fuses(join_type, has_equality_keys=False) == JoinFuses(output=False, inputs=True)


@pytest.mark.parametrize("join_type", ["", "  ", "(exists#7)"])
def test_a_join_type_without_a_name_is_refused_naming_the_field(join_type: str) -> None:
    with pytest.raises(ValueError, match=r"join_type: .* names no join type"):
        join_fuses(join_type, has_equality_keys=True)
