"""What requests keep of their bodies for a second sending (dataplane/gateway/replay.py): all
of what went out, up to a limit per request and a budget for all of them, given back when
dropped."""

from dataplane.gateway.replay import REPLAY_BUDGET, REPLAY_LIMIT, KeptBody, ReplayBudget


def test_a_body_kept_in_pieces_is_given_back_whole_and_leaves_the_budget():
    budget = ReplayBudget()
    kept = KeptBody(budget)
    pieces = [bytes([n]) * 1000 for n in range(50)]
    assert all(kept.keep(piece) for piece in pieces)
    assert budget.held == 50_000
    assert kept.take() == b"".join(pieces)
    assert budget.held == 0
    assert kept.keep(b"again") and kept.take() == b"again"


def test_a_body_over_the_limit_is_no_longer_kept():
    budget = ReplayBudget()
    kept = KeptBody(budget)
    assert kept.keep(b"x" * REPLAY_LIMIT)
    assert not kept.keep(b"x")
    assert (kept.size, budget.held) == (0, 0)


def test_past_the_budget_a_body_is_not_kept_and_what_it_kept_goes_back():
    budget = ReplayBudget()
    full = [KeptBody(budget) for _ in range(REPLAY_BUDGET // REPLAY_LIMIT)]
    for kept in full:
        assert kept.keep(b"a" * (REPLAY_LIMIT // 2)) and kept.keep(b"b" * (REPLAY_LIMIT // 2))
    late = KeptBody(budget)
    assert not late.keep(b"c")
    full[0].drop()
    assert budget.held == REPLAY_BUDGET - REPLAY_LIMIT
    assert late.keep(b"c")
