from dsh_assets.graph.runner import OwnPublication


def test_a_dp_releases_own_verdict_reads_as_the_end_of_its_progress_line():
    published = OwnPublication(True, "/home/published/p/dp/x/dp_counts.parquet", "ab" * 32, [], {}, 1.1)
    assert published.words() == "; published at /home/published/p/dp/x/dp_counts.parquet"
    refused = OwnPublication(False, None, None, ["audit failed", "budget"], {}, 1.1)
    assert refused.words() == "; not published: audit failed; budget (its epsilon 1.1 is spent)"
    # A refusal recorded without its epsilon still reads, without the figure it lacks.
    assert OwnPublication(False, None, None, ["no tables"], {}, None).words() == "; not published: no tables"
    assert refused.as_json()["budget_spent"] is True
