import pytest

from nmt.training.stopping import Budget
from nmt.training.schedule import LRSchedule
from conftest import seed_train


def test_linear_decays_over_the_budget_after_warmup():
    schedule = LRSchedule(seed_train(lr=0.002, lr_schedule="linear", warmup_steps=10, min_lr=0.0002))
    assert schedule.lr(0, 0.0) == pytest.approx(0.002 / 10)  # warm-up starts small ...
    assert schedule.lr(9, 0.0) == pytest.approx(0.002)  # ... and reaches lr at its last step
    assert schedule.lr(500, 0.5) == pytest.approx(0.0011)  # halfway between lr and min_lr
    assert schedule.lr(900, 1.0) == pytest.approx(0.0002)


def test_plateau_decays_after_patience_and_survives_a_resume():
    cfg = seed_train(lr=0.001, lr_schedule="plateau", lr_decay_factor=0.5, lr_decay_patience=2, min_lr=0.0002)
    schedule = LRSchedule(cfg)
    for improved in (True, False, True, False):  # never two stale validations in a row
        schedule.on_validation(improved)
    assert schedule.lr(100, 0.3) == pytest.approx(0.001)
    schedule.on_validation(False)
    assert schedule.lr(100, 0.3) == pytest.approx(0.0005)
    resumed = LRSchedule(cfg)
    resumed.load_state_dict(schedule.state_dict())
    for _ in range(4):
        resumed.on_validation(False)
    assert resumed.lr(100, 0.3) == pytest.approx(0.0002)  # 0.000125 is floored at min_lr


def test_constant_ignores_validations_and_progress():
    schedule = LRSchedule(seed_train(lr=0.003))
    for _ in range(5):
        schedule.on_validation(False)
    assert schedule.lr(10_000, 0.99) == 0.003


def test_budget_progress_is_the_first_limit_to_run_out():
    assert Budget(max_steps=200, max_minutes=0).progress(50, total_steps=1000) == 0.25
    assert Budget(max_steps=0, max_minutes=0).progress(50, total_steps=1000) == 0.05
    assert Budget(max_steps=0, max_minutes=1, already_elapsed=45).progress(1, total_steps=1000) == pytest.approx(0.75, abs=0.01)
    assert Budget(max_steps=10, max_minutes=0).progress(20, total_steps=1000) == 1.0
