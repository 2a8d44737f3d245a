#!/bin/bash
# `tern chat` at a real terminal (a tmux pane): a long answer, Ctrl-C, then a follow-up.
# Prints the time from Ctrl-C to the stopped answer on screen. Needs tmux and a built
# target/release/tern (or $TERN) and the default model in the cache.
T=$(realpath "${TERN:-target/release/tern}")
X="tmux -L ternchat"
$X kill-server 2>/dev/null
$X new-session -d -s tc -x 160 -y 50 "$T chat -t 2 -n 4000; sleep 60" || exit 1
wait_pane() { for _ in $(seq 2000); do $X capture-pane -p -S -300 -t tc 2>/dev/null | grep -q "$1" && return 0; sleep 0.005; done; echo "timeout waiting for $1"; $X capture-pane -p -t tc; exit 1; }
wait_pane '^>'
$X send-keys -t tc "Write a very long story about a dragon who learns to cook, in ten chapters." Enter
sleep 1
t0=$(date +%s%N)
$X send-keys -t tc C-c
wait_pane 'finish: cancelled'
t1=$(date +%s%N)
echo "Ctrl-C to 'finish: cancelled' on screen: $(( (t1 - t0) / 1000000 )) ms"
$X send-keys -t tc "Give the dragon a name." Enter
for _ in $(seq 600); do [ "$($X capture-pane -p -S -300 -t tc | grep -c '| finish: ')" -ge 2 ] && break; sleep 0.1; done
$X capture-pane -p -S -300 -t tc | grep -v '^$' | tail -14
$X send-keys -t tc C-c
sleep 0.5
$X capture-pane -p -t tc | grep -v '^$' | tail -2
$X kill-server 2>/dev/null
