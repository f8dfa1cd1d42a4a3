"""The stability record of projects/siamesenorm/stability.py on hand-made loss sequences (spec section 5.4)."""
import math

from projects.siamesenorm.stability import Stability, stability_options


def test_spikes_count_excursions_above_the_running_minimum_that_recover():
    s = Stability(stability_options())
    out = None
    for loss in [5.0, 3.0, 2.0, 2.6, 2.1, 1.9, 2.3, 2.35, 1.95, 3.0]:
        out = s.train(loss)
    # 2.6 (> 2.0 + 0.5) recovers at 2.1: one spike; 2.3, 2.35 stay within 0.5 of 1.9; 3.0 opens an excursion that
    # has not recovered: not (yet) a spike
    assert out["train/spikes"] == 1
    assert math.isclose(out["train/max_rise"], 3.0 - 1.9)
    assert s.train(2.0)["train/spikes"] == 2


def test_collapse_to_the_unigram_loss_or_a_rise_of_one_nat_is_unstable():
    o = stability_options()
    s = Stability(o)
    assert s.evaluation(2.0)["eval/collapsed"] == 0.0
    r = s.evaluation(1.5)
    assert r["eval/collapsed"] == 0.0 and r["eval/best_loss"] == 1.5
    r = s.evaluation(0.9 * o.unigram_loss)  # 2.889: within 1 nat of the best, but at the unigram level
    assert r["eval/collapsed"] == 1.0 and r["eval/unstable"] == 1.0
    assert math.isclose(r["eval/loss_last3"], (2.0 + 1.5 + 0.9 * o.unigram_loss) / 3)
    s2 = Stability(o)
    s2.evaluation(1.0)
    assert s2.evaluation(2.05)["eval/collapsed"] == 1.0  # > best + 1 nat
    s3 = Stability(o, diverge_loss=9.0)
    s3.train(5.0)
    s3.train(9.5)  # the trainer's own stop
    assert s3.evaluation(1.4)["eval/unstable"] == 1.0
