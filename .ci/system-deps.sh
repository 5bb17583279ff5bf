#!/usr/bin/env bash
# Debian packages local Spark needs: Java 17+ and jarjar (relocates Jackson for the Iceberg runtime);
# and Chromium, the browser the console's end-to-end tests drive (tests/e2e/test_console_browser.py).
set -euo pipefail
need=()
java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1; }
if ! command -v java >/dev/null || [ "$(java_major)" -lt 17 ]; then need+=(openjdk-17-jre-headless); fi
[ -f /usr/share/java/jarjar.jar ] || need+=(libjarjar-java)
[ -x /usr/bin/chromium ] || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "turnstile needs the Debian packages: ${need[*]}. Install them: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "installing ${need[*]} (apt-get)"
apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
