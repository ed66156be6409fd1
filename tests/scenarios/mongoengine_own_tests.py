"""N-T7: traffic nobody planted. mongoengine's own tests (test_dereference.py and test_signals.py from the
mongoengine 0.29.3 sdist on PyPI, unmodified: thousands of saves, dereferences, drops and re-creations,
profiler-counted queries), run once against the server directly and once through mongotap.
Run as `mongoengine_own_tests.py URI DBNAME UPSTREAM_URI` (DBNAME is unused: the tests use mongoenginetest).

mongotap must change no test's outcome (its side connection reads indexes while the tests count their queries
with the profiler) and must report nothing: every finding it made on this traffic before was wrong (a
profiler read as redundant, the profiler's queries as needing an index, ...). Some tests fail against
SecantusDB itself (its profiler counts differently): they must fail the same way through mongotap.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

from common import check

uri, dbname, upstream = sys.argv[1:4]
here = Path(__file__).resolve().parent
suite = here.parents[1] / ".venv" / "mongoengine-tests"
files = ["test_dereference.py", "test_signals.py"]
check(all((suite / f).exists() for f in files), f"{suite} lacks the sdist's tests: run scripts/setup.sh")


def run(host):
    env = dict(os.environ, MONGOTAP_SUITE_HOST=host, PYTHONPATH=str(here))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "suite_host", "-rf",
                          *files], cwd=suite, env=env, capture_output=True, text=True, timeout=300)
    failed = set(re.findall(r"^FAILED (\S+)", out.stdout, re.M))
    passed = re.search(r"(\d+) passed", out.stdout)
    check(passed is not None, f"pytest did not run:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return int(passed.group(1)), failed


direct_passed, direct_failed = run(upstream)
tapped_passed, tapped_failed = run(uri)
check(tapped_failed == direct_failed and tapped_passed == direct_passed,
      f"mongotap changed the outcome: failed only through it {sorted(tapped_failed - direct_failed)}, "
      f"passed only through it {sorted(direct_failed - tapped_failed)}")
print(f"mongoengine's own tests: {tapped_passed} passed and {len(tapped_failed)} failed both directly and through "
      f"mongotap ({len(direct_failed)} fail on SecantusDB itself)")
