package wire

import "testing"

func TestEcho(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"5x", `"5x"`},
		{"sixteen-bytes-ok", `"sixteen-bytes-ok"`},
		{"tab\there", `"tab\there"`},
		{"cachesvc_Q7vKp2xN4mR8sT1wY6zB3cD5fG9hJ0kL2nP4qS6u", `"cach"... (49 bytes, not shown in full: a long value may be a secret)`},
		// A token's start, cut short in the paste, is not echoed either.
		{"cachesvc_Q7vKp2x", `"cach"... (16 bytes, not shown in full: a long value may be a secret)`},
		{"cachesvc_", `"cach"... (9 bytes, not shown in full: a long value may be a secret)`},
		{"cachesvc", `"cachesvc"`},
		{"héllo wörld, seventeen", `"h\u00e9ll"... (24 bytes, not shown in full: a long value may be a secret)`},
		{"\xff\xfe\xfd\xfc\xfb-invalid-utf8-long", `"\xff\xfe\xfd\xfc"... (23 bytes, not shown in full: a long value may be a secret)`},
	} {
		if got := Echo(tc.in); got != tc.want {
			t.Errorf("Echo(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
