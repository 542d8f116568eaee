from dsh_assets.core.publication.gate import parse_publication
from dsh_assets.graph.runner import CandidateOrder, OwnPublication, StepOutcome


def test_a_dp_releases_own_verdict_reads_as_the_end_of_its_progress_line():
    published = OwnPublication(True, "/home/published/p/dp/x/dp_counts.parquet", "ab" * 32, [], {}, 1.1)
    assert published.words() == "; published at /home/published/p/dp/x/dp_counts.parquet"
    refused = OwnPublication(False, None, None, ["audit failed", "budget"], {}, 1.1)
    assert refused.words() == "; not published: audit failed; budget (its epsilon 1.1 is spent)"
    # A refusal recorded without its epsilon still reads, without the figure it lacks.
    assert OwnPublication(False, None, None, ["no tables"], {}, None).words() == "; not published: no tables"
    assert refused.as_json()["budget_spent"] is True


POLICY = parse_publication({"publication": {"config": ["a", "b", "c"], "gate": {"singling_out_rate": {"max": 0.001}}}})


def finished(singling_out_rate: float) -> StepOutcome:
    return StepOutcome(success=True, metadata={}, figures={"singling_out": {"singling_out_rate": singling_out_rate}},
                       checks={}, errors=[], seconds=1.0)


def test_the_candidates_the_publication_tries_go_one_at_a_time_until_one_passes():
    order = CandidateOrder(["a", "b", "c"], ["x", "y"])
    assert order.next() == ("a", "full")
    assert order.next() == ("x", "light")  # b waits for a's verdict; the others fill the workers
    order.finished("x", finished(0.5), POLICY)
    assert order.next() == ("y", "light")
    assert order.next() is None  # still waiting for a
    order.finished("a", finished(0.5), POLICY)  # refused: b is tried, at full strength
    assert order.next() == ("b", "full")
    order.finished("b", finished(0.0), POLICY)  # passes: c is not tried, and gets the light evaluation
    assert order.next() == ("c", "light")
    assert order.next() is None
