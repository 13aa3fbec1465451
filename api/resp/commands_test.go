package resp_test

import (
	"io"
	"strings"
	"testing"
	"time"
)

// step is one command of a conversation and the exact reply expected; a
// want ending in "..." is a prefix.
type step struct {
	send []string
	want string
}

// converse runs steps in order on one connection.
func converse(t *testing.T, r *raw, steps []step) {
	t.Helper()
	for _, s := range steps {
		got := r.do(s.send...)
		if p, ok := strings.CutSuffix(s.want, "..."); ok {
			if !strings.HasPrefix(got, p) {
				t.Errorf("%q: got %q, want prefix %q", s.send, got, p)
			}
			continue
		}
		if got != s.want {
			t.Errorf("%q: got %q, want %q", s.send, got, s.want)
		}
	}
}

// TestCommands runs every command, its options and its errors on a server
// without authentication, each case on a fresh connection in RESP2.
func TestCommands(t *testing.T) {
	e := start(t, options{})
	k1, k2, k3 := torchKey("one"), torchKey("two"), torchKey("three")
	v1 := torchValue("AAAA", 1500)
	unknown := "-ERR unknown command 'FLUSHALL'; cachesvc's RESP listener speaks GET, SET, MGET, EXISTS, PING, ECHO, AUTH, HELLO, CLIENT, SELECT and QUIT\r\n"
	cases := []struct {
		name  string
		steps []step
	}{
		{"ping", []step{
			{[]string{"PING"}, "+PONG\r\n"},
			{[]string{"ping", "hi"}, bulk("hi")},
			{[]string{"PING", "a", "b"}, "-ERR wrong number of arguments for 'ping' command\r\n"},
		}},
		{"echo", []step{
			{[]string{"ECHO", "hello world"}, bulk("hello world")},
			{[]string{"ECHO"}, "-ERR wrong number of arguments for 'echo' command\r\n"},
		}},
		{"set and get", []step{
			{[]string{"GET", k1}, "$-1\r\n"},
			{[]string{"SET", k1, v1}, "+OK\r\n"},
			{[]string{"GET", k1}, bulk(v1)},
			{[]string{"SET", k1, v1}, "+OK\r\n"},                    // identical: a no-op
			{[]string{"SET", k1, torchValue("BBBB", 9)}, "+OK\r\n"}, // different: the first entry stays
			{[]string{"GET", k1}, bulk(v1)},
			{[]string{"get", k1, k2}, "-ERR wrong number of arguments for 'get' command\r\n"},
			{[]string{"SET", k1}, "-ERR wrong number of arguments for 'set' command\r\n"},
		}},
		{"set options", []step{
			{[]string{"SET", k2, "v", "NX"}, "+OK\r\n"},
			{[]string{"SET", k2, "v", "NX"}, "$-1\r\n"},
			{[]string{"SET", k2, "other", "nx"}, "$-1\r\n"},
			{[]string{"SET", k3, "v", "EX", "60"}, "+OK\r\n"},
			{[]string{"SET", k3, "v", "PX", "60000", "NX"}, "$-1\r\n"},
			{[]string{"SET", k3, "v", "KEEPTTL"}, "+OK\r\n"},
			{[]string{"SET", k3, "v", "EX", "0"}, "-ERR invalid expire time in 'set' command\r\n"},
			{[]string{"SET", k3, "v", "EX", "soon"}, "-ERR invalid expire time in 'set' command\r\n"},
			{[]string{"SET", k3, "v", "EX"}, "-ERR syntax error\r\n"},
			{[]string{"SET", k3, "v", "EX", "1", "PX", "1"}, "-ERR syntax error\r\n"},
			{[]string{"SET", k3, "v", "FOREVER"}, "-ERR syntax error\r\n"},
			{[]string{"SET", k3, "v", "XX"}, "-ERR SET XX is not supported: cachesvc entries are immutable (the first writer wins)\r\n"},
			{[]string{"SET", k3, "v", "GET"}, "-ERR SET GET is not supported by cachesvc's RESP listener\r\n"},
		}},
		{"mget and exists", []step{
			{[]string{"SET", k1, v1}, "+OK\r\n"},
			{[]string{"MGET", k1, torchKey("absent"), k1}, "*3\r\n" + bulk(v1) + "$-1\r\n" + bulk(v1)},
			{[]string{"EXISTS", k1, torchKey("absent"), k1}, ":2\r\n"},
			{[]string{"MGET"}, "-ERR wrong number of arguments for 'mget' command\r\n"},
			{[]string{"EXISTS"}, "-ERR wrong number of arguments for 'exists' command\r\n"},
		}},
		{"bad keys", []step{
			{[]string{"GET", "foo"}, "-ERR key 'foo' is not a torch or Triton cache key: key \"foo\" is neither torch's Redis form (\"pt2:<cache id>::<key>:c1\") nor Triton's (\"triton:…\"); a bare key needs field cache (torch's cache id, e.g. \"fx-graph-v1\") (plugin pt2@1.0.0)\r\n"},
			{[]string{"SET", "pt2:fx-graph-v1::abc", "v"}, "-ERR key 'pt2:fx-graph-v1::abc' is not a torch or Triton cache key: torch key \"pt2:fx-graph-v1::abc\" does not end in a format such as \":c1\" (plugin pt2@1.0.0)\r\n"},
			{[]string{"MGET", k1, "nope"}, "-ERR key 'nope' is not a torch or Triton cache key: ..."},
			{[]string{"EXISTS", "triton:"}, "-ERR key 'triton:' is not a torch or Triton cache key: Triton key \"triton:\" has nothing after the prefix (plugin pt2@1.0.0)\r\n"},
			{[]string{"GET", ""}, "-ERR empty key: cachesvc maps torch (pt2:...) and Triton (triton:...) cache keys\r\n"},
			{[]string{"GET", "pt2:fx\x00"}, "-ERR key has byte 0x00 at offset 6: keys must be printable ASCII\r\n"},
			{[]string{"GET", "triton:" + strings.Repeat("k", 4096)}, "-ERR key of 4103 bytes exceeds the limit of 4096 bytes\r\n"},
		}},
		{"unknown command", []step{
			{[]string{"FLUSHALL"}, unknown},
			{[]string{"\x01\x02bad"}, "-ERR unknown command '??bad'; cachesvc's RESP listener speaks ..."},
		}},
		{"select", []step{
			{[]string{"SELECT", "0"}, "+OK\r\n"},
			{[]string{"SELECT", "1"}, "-ERR DB index is out of range: cachesvc's RESP listener serves namespace 'default' as database 0\r\n"},
		}},
		{"client", []step{
			{[]string{"CLIENT", "SETINFO", "LIB-NAME", "redis-py"}, "+OK\r\n"},
			{[]string{"CLIENT", "SETINFO", "lib-ver", "8.1.0"}, "+OK\r\n"},
			{[]string{"CLIENT", "SETINFO", "color", "blue"}, "-ERR Unrecognized option 'color'\r\n"},
			{[]string{"CLIENT", "GETNAME"}, "$-1\r\n"},
			{[]string{"CLIENT", "SETNAME", "trainer-7"}, "+OK\r\n"},
			{[]string{"CLIENT", "GETNAME"}, bulk("trainer-7")},
			{[]string{"CLIENT", "SETNAME", "has space"}, "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"},
			{[]string{"CLIENT", "ID"}, ":..."},
			{[]string{"CLIENT", "MAINT_NOTIFICATIONS", "ON", "moving-endpoint-type", "internal-ip"}, "-ERR CLIENT MAINT_NOTIFICATIONS is not supported: cachesvc sends no maintenance notifications\r\n"},
			{[]string{"CLIENT", "KILL", "ID", "1"}, "-ERR unknown subcommand 'KILL'; cachesvc's RESP listener speaks CLIENT SETINFO, SETNAME, GETNAME and ID\r\n"},
			{[]string{"CLIENT", "SETNAME"}, "-ERR wrong number of arguments for 'client|setname' command\r\n"},
		}},
		{"hello", []step{
			{[]string{"HELLO"}, "*14\r\n" + bulk("server") + bulk("cachesvc") + bulk("version") + bulk("test") + bulk("proto") + ":2\r\n..."},
			{[]string{"HELLO", "4"}, "-NOPROTO unsupported protocol version\r\n"},
			{[]string{"HELLO", "three"}, "-ERR Protocol version is not an integer or out of range\r\n"},
			{[]string{"HELLO", "3", "BOGUS"}, "-ERR Syntax error in HELLO option 'BOGUS'\r\n"},
			{[]string{"HELLO", "3", "SETNAME", "t1"}, "%7\r\n" + bulk("server") + bulk("cachesvc") + bulk("version") + bulk("test") + bulk("proto") + ":3\r\n..."},
			{[]string{"GET", k3 + "x"}, "-ERR key 'pt2:fx-graph-v1::fthree7a1c3e9b:c1x' is not a torch or Triton cache key: ..."},
			{[]string{"GET", torchKey("absent")}, "_\r\n"}, // RESP3 null
			{[]string{"CLIENT", "GETNAME"}, bulk("t1")},
			{[]string{"HELLO", "2"}, "*14\r\n..."},
			{[]string{"GET", torchKey("absent")}, "$-1\r\n"},
		}},
		{"auth without tokens", []step{
			{[]string{"AUTH", "anything"}, "+OK\r\n"},
			{[]string{"AUTH", "user", "anything"}, "+OK\r\n"},
			{[]string{"AUTH"}, "-ERR wrong number of arguments for 'auth' command\r\n"},
			{[]string{"HELLO", "3", "AUTH", "default", "anything"}, "%7\r\n..."},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { converse(t, e.dial(), tc.steps) })
	}
}

// TestInlineAndPipeline: inline (telnet) commands work, and pipelined
// commands are answered in order.
func TestInlineAndPipeline(t *testing.T) {
	e := start(t, options{})
	r := e.dial()
	r.send("PING\r\nECHO \"a b\"\r\n")
	if got := r.reply() + r.reply(); got != "+PONG\r\n"+bulk("a b") {
		t.Errorf("inline: %q", got)
	}
	k := torchKey("pipe")
	r.send(encode("SET", k, "v1") + encode("GET", k) + "*0\r\n" + encode("EXISTS", k) + encode("PING"))
	want := []string{"+OK\r\n", bulk("v1"), ":1\r\n", "+PONG\r\n"}
	for _, w := range want {
		if got := r.reply(); got != w {
			t.Errorf("pipelined: got %q, want %q", got, w)
		}
	}
}

// TestQuit: QUIT answers OK and closes the connection.
func TestQuit(t *testing.T) {
	e := start(t, options{})
	r := e.dial()
	if got := r.do("QUIT"); got != "+OK\r\n" {
		t.Fatalf("QUIT: %q", got)
	}
	_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(r.r); err != nil || len(b) != 0 {
		t.Fatalf("after QUIT: read %q, %v; want EOF", b, err)
	}
}

// TestProbeCountsNoError: a capability probe the listener deliberately
// declines (redis-py 8 sends CLIENT MAINT_NOTIFICATIONS on every connection
// and carries on after the error) is counted as result "unsupported", so a
// healthy client adds nothing to the error series an alert might watch;
// a subcommand nobody sends on connect is still an error.
func TestProbeCountsNoError(t *testing.T) {
	e := start(t, options{})
	cases := []struct {
		send   []string
		want   string // reply prefix
		result string // the result label it is counted under
	}{
		{[]string{"CLIENT", "MAINT_NOTIFICATIONS", "ON", "moving-endpoint-type", "internal-ip"}, "-ERR CLIENT MAINT_NOTIFICATIONS is not supported", "unsupported"},
		{[]string{"client", "maint_notifications", "OFF"}, "-ERR CLIENT MAINT_NOTIFICATIONS is not supported", "unsupported"},
		{[]string{"CLIENT", "KILL", "ID", "1"}, "-ERR unknown subcommand 'KILL'", "error"},
		{[]string{"CLIENT", "SETINFO", "LIB-NAME", "redis-py"}, "+OK", "ok"},
	}
	r := e.dial()
	for _, tc := range cases {
		series := `cachesvc_resp_commands_total{command="client",result="` + tc.result + `"}`
		before := max(e.metric(series), 0)
		if got := r.do(tc.send...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q: got %q, want prefix %q", tc.send, got, tc.want)
		}
		if got := e.metric(series); got != before+1 {
			t.Errorf("%q: %s went from %v to %v, want one more", tc.send, series, before, got)
		}
	}
	if got := e.metric(`cachesvc_resp_commands_total{command="client",result="error"}`); got != 1 {
		t.Errorf("client errors counted %v, want 1 (the KILL)", got)
	}
}
