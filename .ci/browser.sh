# Debian's chromium and chromedriver for the review page's browser tests
# (tests/ui/browser.rs), from the package registry. Sourced by .ci/run
# before `cargo test`, which then fails if the browser is missing
# (CLAUDE_MEMORY_REQUIRE_BROWSER=1); each test starts its own chromedriver
# on a free port.
echo "== chromium and chromedriver (Debian packages)"
if ! command -v chromedriver >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
chromedriver --version
export CLAUDE_MEMORY_TEST_CHROMEDRIVER="$(command -v chromedriver)"
export CLAUDE_MEMORY_TEST_CHROMIUM="$(command -v chromium)"
export CLAUDE_MEMORY_REQUIRE_BROWSER=1
