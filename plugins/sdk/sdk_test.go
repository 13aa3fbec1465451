package sdk

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestAppendStringIsJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{`quote " and \ backslash`, `quote " and \ backslash`},
		{"ctl \x00\x01\x1f\n\r\t", "ctl \x00\x01\x1f\n\r\t"},
		{"utf8 ü 日本", "utf8 ü 日本"},
		{"bad \xff byte", "bad \ufffd byte"},
		{"", ""},
	}
	for _, tt := range tests {
		var got string
		if err := json.Unmarshal(appendString(nil, tt.in), &got); err != nil || got != tt.want {
			t.Errorf("appendString(%q) = %s (%v); decodes to %q, want %q", tt.in, appendString(nil, tt.in), err, got, tt.want)
		}
	}
}

func TestAppendResultAndDescribe(t *testing.T) {
	var r struct {
		CanonicalPtr uint32            `json:"canonical_ptr"`
		CanonicalLen uint32            `json:"canonical_len"`
		Components   map[string]string `json:"components"`
		DisplayName  string            `json:"display_name"`
	}
	out := AppendResult(nil, Result{Canonical: []byte("abc"), Components: map[string]string{"b": "2", "a": "1\n"}, DisplayName: "jit_f"}, 4096)
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if r.CanonicalPtr != 4096 || r.CanonicalLen != 3 || r.Components["a"] != "1\n" || r.DisplayName != "jit_f" {
		t.Fatalf("%+v", r)
	}
	// Components are sorted so that the JSON is deterministic.
	if want := `{"canonical_ptr":4096,"canonical_len":3,"display_name":"jit_f","components":{"a":"1\n","b":"2"}}`; string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	var e struct{ Error string }
	if err := json.Unmarshal(AppendError(nil, `bad "x"`), &e); err != nil || e.Error != `bad "x"` {
		t.Fatalf("%+v %v", e, err)
	}
	d := AppendDescribe(nil, Description{Name: "n", Version: "1", Backends: []string{"b"}})
	if string(d) != `{"abi":1,"name":"n","version":"1","backends":["b"],"reads":[]}` {
		t.Fatalf("%s", d)
	}
	if string(AppendNormalized(nil, 8, 2)) != `{"normalized_ptr":8,"normalized_len":2}` {
		t.Fatal("normalized")
	}
}

func TestInvoke(t *testing.T) {
	Register(Description{Name: "t", Version: "1", Backends: []string{"t"}}, func(b []byte) (Result, error) {
		if len(b) == 0 {
			return Result{}, errors.New("empty")
		}
		return Result{Canonical: b}, nil
	})
	if r, err := Invoke([]byte("x")); err != nil || string(r.Canonical) != "x" {
		t.Fatal(r, err)
	}
	if _, err := Invoke(nil); err == nil {
		t.Fatal("no error")
	}
	if _, err := InvokeNormalize(nil); !errors.Is(err, ErrNotRegistered) {
		t.Fatal(err)
	}
	if string(Describe()) != `{"abi":1,"name":"t","version":"1","backends":["t"],"reads":[]}` {
		t.Fatalf("%s", Describe())
	}
}
