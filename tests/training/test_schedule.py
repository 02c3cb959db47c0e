import pytest

from nmt.training.stopping import Budget, LRSchedule
from conftest import seed_train


def test_linear_decays_over_the_budget_after_warmup():
    schedule = LRSchedule(seed_train(lr=0.002, lr_schedule="linear", warmup_steps=10, min_lr=0.0002))
    assert schedule.lr(0, 0.0) == pytest.approx(0.002 / 10)  # warm-up starts small ...
    assert schedule.lr(9, 0.0) == pytest.approx(0.002)  # ... and reaches lr at its last step
    assert schedule.lr(500, 0.5) == pytest.approx(0.0011)  # halfway between lr and min_lr
    assert schedule.lr(900, 1.0) == pytest.approx(0.0002)


def test_constant_ignores_progress():
    assert LRSchedule(seed_train(lr=0.003)).lr(10_000, 0.99) == 0.003


def test_budget_progress_is_the_first_limit_to_run_out():
    assert Budget(max_steps=200, max_minutes=0).progress(50, total_steps=1000) == 0.25
    assert Budget(max_steps=0, max_minutes=0).progress(50, total_steps=1000) == 0.05
    assert Budget(max_steps=0, max_minutes=1, already_elapsed=45).progress(1, total_steps=1000) == pytest.approx(0.75, abs=0.01)
    assert Budget(max_steps=10, max_minutes=0).progress(20, total_steps=1000) == 1.0
