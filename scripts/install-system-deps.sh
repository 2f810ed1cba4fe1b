#!/usr/bin/env bash
# Installs the Debian packages Jarvis uses, where apt-get is available; says what to do where it is not.
# Usage: install-system-deps.sh [bubblewrap] [libseccomp2] [slirp4netns] [chromium] [postgresql] [espeak-ng] [ffmpeg] [systemd] [npm] [dovecot] [g++]
#        (no argument: all but dovecot and g++; dovecot serves the mail tests (make test); g++ is asked for by `make install-local` when no C++ compiler is there)
set -u
wanted=("$@")
[ ${#wanted[@]} -eq 0 ] && wanted=(bubblewrap libseccomp2 slirp4netns chromium postgresql espeak-ng ffmpeg systemd npm)

have() {
  case "$1" in
    bubblewrap) command -v bwrap >/dev/null 2>&1 ;;
    libseccomp2) ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' ;;
    slirp4netns) command -v slirp4netns >/dev/null 2>&1 ;;
    chromium) command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 ;;
    postgresql) ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 ;;
    systemd) command -v systemd-analyze >/dev/null 2>&1 ;;
    g++) command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 ;;
    espeak-ng) command -v espeak-ng >/dev/null 2>&1 ;;
    ffmpeg) command -v ffmpeg >/dev/null 2>&1 ;;
    npm) command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1 ;;
    dovecot) [ -x /usr/sbin/dovecot ] && [ -x /usr/lib/dovecot/imap ] && [ -x /usr/lib/dovecot/lmtp ] ;;
  esac
}
why() {
  case "$1" in
    bubblewrap) echo "the sandbox that runs generated tools and jorb scripts" ;;
    libseccomp2) echo "the sandbox's seccomp filter, without which a generated tool may not write your folders" ;;
    slirp4netns) echo "network for the generated tools whose network access you approved, outside the host's network namespace" ;;
    chromium) echo "the browser tests of the web UI, and the browser Jarvis drives (mcp/playwright.toml)" ;;
    postgresql) echo "the PostgreSQL storage tests" ;;
    systemd) echo "systemd-analyze, which checks the login service's unit file in the tests" ;;
    g++) echo "building llama-cpp-python, the built-in model's server" ;;
    espeak-ng) echo "speech output (voice.tts: espeak-ng)" ;;
    ffmpeg) echo "decoding voice recordings (webm, ogg, mp3...)" ;;
    npm) echo "the published MCP servers (Node.js) the tests run, Playwright MCP among them" ;;
    dovecot) echo "the IMAP and LMTP server the mail account tests run (dovecot-imapd dovecot-lmtpd)" ;;
  esac
}

# mcp/playwright.toml runs Chromium at /usr/bin/chromium (Debian's package); one found elsewhere (Ubuntu's
# chromium-browser, a snap) serves the tests but not Jarvis's browser until the file names it.
browser_path_note() {
  case " ${wanted[*]} " in *" chromium "*) ;; *) return 0 ;; esac
  [ -x /usr/bin/chromium ] && return 0
  local found
  found=$(command -v chromium || command -v chromium-browser) || return 0
  echo "Note: Chromium is at $found, not /usr/bin/chromium where Jarvis's browser (mcp/playwright.toml) looks for it:" \
    "put $found in its --executable-path and requires." >&2
}

missing=()
for p in "${wanted[@]}"; do have "$p" || missing+=("$p"); done
packages=()
for p in "${missing[@]}"; do
  case "$p" in dovecot) packages+=(dovecot-imapd dovecot-lmtpd) ;; *) packages+=("$p") ;; esac
done
[ ${#missing[@]} -eq 0 ] && { browser_path_note; exit 0; }

sudo=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo="sudo -n"
if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$sudo" ]; }; then
  echo "Installing system packages: ${packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! $sudo apt-get install -y -q "${packages[@]}" >/tmp/jarvis-apt.log 2>&1; then
    $sudo apt-get update -q >>/tmp/jarvis-apt.log 2>&1
    $sudo apt-get install -y -q "${packages[@]}" >>/tmp/jarvis-apt.log 2>&1 || {
      echo "apt-get could not install ${packages[*]}; see /tmp/jarvis-apt.log" >&2; }
  fi
fi
for p in "${missing[@]}"; do
  have "$p" || echo "Note: $p is not installed ($(why "$p")); install it with your package manager (e.g. 'apt-get install $p' or 'brew install $p')." >&2
done
browser_path_note
exit 0
