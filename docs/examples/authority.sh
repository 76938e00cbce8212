#!/bin/sh
# An example HAI-Relay authority adapter (docs/authority.md), in POSIX sh.
# Policy: read_only tasks are allowed; state_changing tasks are allowed
# only for claude, with the guarded assurance; anything else is denied.
#
# The relay writes its request as compact JSON on one line, keys in a fixed
# order and no spaces, so this sketch can match fields as text. A real
# adapter should parse the JSON (see authority.py).
IFS= read -r req || exit 1
case "$req" in
*'"version":1,'*) ;;
*) echo "unknown request version: $req" >&2; exit 1 ;;
esac
case "$req" in
*'"mode":"read_only"'*)
	echo '{"decision":"allow","assurance":"standard"}' ;;
*'"target":"claude",'*'"mode":"state_changing"'*)
	echo '{"decision":"allow","assurance":"guarded"}' ;;
*)
	echo '{"decision":"deny","code":"example.state_changing","message":"only claude may change state"}' ;;
esac
