import cProfile, pstats, io, time
import pytest
from tests.api.conftest import World
pytestmark = pytest.mark.django_db

def test_prof(world: World):
    c = world.client("owner")
    for path in [f"/api/v1/jobs/{world.job.pk}/", f"/api/v1/jobs/{world.job.pk}/policy/", "/api/v1/jobs/?limit=50"]:
        c.get(path)
        t = time.perf_counter()
        pr = cProfile.Profile(); pr.enable()
        for _ in range(200):
            c.get(path)
        pr.disable()
        print(path, (time.perf_counter() - t) / 200 * 1000, "ms/req (profiled)")
        s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12); print(s.getvalue()[:3500])
