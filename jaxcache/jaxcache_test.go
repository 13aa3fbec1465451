package jaxcache

import (
	"bytes"
	"compress/zlib"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

const hex64 = "14ac57aa00000000000000000000000000000000000000000000000000000000"

func jaxValue(t *testing.T, comp string, secs uint32, payload []byte) []byte {
	t.Helper()
	var raw bytes.Buffer
	binary.Write(&raw, binary.BigEndian, secs)
	raw.Write(payload)
	var out bytes.Buffer
	switch comp {
	case "zlib":
		w := zlib.NewWriter(&out)
		w.Write(raw.Bytes())
		w.Close()
	case "zstd":
		w, _ := zstd.NewWriter(&out)
		w.Write(raw.Bytes())
		w.Close()
	}
	return out.Bytes()
}

func TestValidateName(t *testing.T) {
	good := []string{"jit_f-" + hex64, "jit__lambda_-" + hex64, "pjit_train.step-" + hex64}
	bad := []string{"", "jit_f", "jit_f-" + hex64[:63], "../x-" + hex64, "a/b-" + hex64,
		".hidden-" + hex64, "jit_f-" + strings.ToUpper(hex64), strings.Repeat("a", 200) + "-" + hex64}
	for _, n := range good {
		if err := ValidateName(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	for _, n := range bad {
		if err := ValidateName(n); !errors.Is(err, ErrInvalidName) {
			t.Errorf("%q: err = %v, want ErrInvalidName", n, err)
		}
	}
}

func TestWriteScanInspect(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	val := jaxValue(t, "zstd", 7, bytes.Repeat([]byte("exe"), 1000))
	sum := sha256.Sum256(val)
	name := "jit_f-" + hex64
	now := time.Unix(1700000000, 123)
	written, err := d.Write(name, bytes.NewReader(val), hex.EncodeToString(sum[:]), now)
	if err != nil || !written {
		t.Fatalf("write: %v %v", written, err)
	}
	// Present: skipped without reading.
	written, err = d.Write(name, errReader{}, "", now)
	if err != nil || written {
		t.Fatalf("second write: %v %v", written, err)
	}
	got, _ := os.ReadFile(d.CachePath(name))
	if !bytes.Equal(got, val) {
		t.Fatal("value differs")
	}
	at, _ := os.ReadFile(filepath.Join(d.Path(), name+AtimeSuffix))
	if len(at) != 8 || int64(binary.LittleEndian.Uint64(at)) != now.UnixNano() {
		t.Fatalf("atime = % x", at)
	}
	// Noise JAX's glob or ours must ignore.
	os.WriteFile(filepath.Join(d.Path(), tempPrefix+"123"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(d.Path(), "notakey-cache"), []byte("x"), 0o644)
	es, err := d.Scan()
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Name != name || es[0].Size != int64(len(val)) || !es[0].HasAtime {
		t.Fatalf("scan = %+v", es)
	}
	v, err := Inspect(d.CachePath(name))
	if err != nil || v.CompileSeconds != 7 || v.Compression != "zstd" {
		t.Fatalf("inspect = %+v, %v", v, err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("must not be read") }

func TestWriteDigestMismatchLeavesNothing(t *testing.T) {
	d, _ := Open(t.TempDir())
	name := "jit_g-" + hex64
	_, err := d.Write(name, strings.NewReader("hello"), hex64, time.Now())
	if !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("err = %v", err)
	}
	des, _ := os.ReadDir(d.Path())
	if len(des) != 0 {
		t.Fatalf("left behind: %v", des)
	}
	if _, err := d.Write("../evil-"+hex64, strings.NewReader("x"), "", time.Now()); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("traversal err = %v", err)
	}
}

func TestInspectIncomplete(t *testing.T) {
	for _, comp := range []string{"zlib", "zstd"} {
		full := jaxValue(t, comp, 3, bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, 5000))
		if v, err := InspectReader(bytes.NewReader(full)); err != nil || v.CompileSeconds != 3 || v.Compression != comp {
			t.Fatalf("%s full: %+v %v", comp, v, err)
		}
		for _, n := range []int{0, 3, len(full) / 2, len(full) - 1} {
			if _, err := InspectReader(bytes.NewReader(full[:n])); !errors.Is(err, ErrIncomplete) {
				t.Errorf("%s truncated to %d: err = %v, want ErrIncomplete", comp, n, err)
			}
		}
		if _, err := InspectReader(bytes.NewReader(append(full, 0))); !errors.Is(err, ErrIncomplete) {
			t.Errorf("%s trailing byte: err = %v", comp, err)
		}
	}
	if _, err := InspectReader(strings.NewReader("plain text here")); !errors.Is(err, ErrIncomplete) {
		t.Errorf("plain: err = %v", err)
	}
}

func TestOpenNotWritable(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	ro := filepath.Join(base, "ro")
	os.Mkdir(ro, 0o555)
	tests := []string{"", file, filepath.Join(file, "sub")}
	if os.Geteuid() != 0 { // root can write anywhere...
		tests = append(tests, ro)
	}
	if fi, err := os.Stat("/sys/kernel"); err == nil && fi.IsDir() {
		tests = append(tests, "/sys/kernel") // ...but not in sysfs
	}
	for _, p := range tests {
		if _, err := Open(p); !errors.Is(err, ErrNotWritable) {
			t.Errorf("Open(%q) err = %v, want ErrNotWritable", p, err)
		}
	}
}

// TestInspectRealJAXValue reads a value written by stock JAX 0.10.2 (CPU,
// zlib: the zstandard package is not installed) into testdata/.
func TestInspectRealJAXValue(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "jit_*-cache"))
	if len(paths) == 0 {
		t.Fatal("no testdata/jit_*-cache fixture")
	}
	for _, p := range paths {
		v, err := Inspect(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if v.Compression != "zlib" || v.Size < 100 {
			t.Errorf("%s: %+v", p, v)
		}
		name := strings.TrimSuffix(filepath.Base(p), CacheSuffix)
		if err := ValidateName(name); err != nil {
			t.Errorf("real JAX key rejected: %v", err)
		}
		data, _ := os.ReadFile(p)
		if _, err := InspectReader(bytes.NewReader(data[:len(data)-10])); !errors.Is(err, ErrIncomplete) {
			t.Errorf("truncated real value: err = %v", err)
		}
	}
}
