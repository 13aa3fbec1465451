//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal and returns its terminal end (what a
// shell gives a command as stdout), closing both ends when t ends. What is
// written to it is read and dropped, so that a command that does write to
// it finishes (and fails its test) instead of blocking on a full terminal.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	go func() { _, _ = io.Copy(io.Discard, master) }() // ends when master closes
	return tty
}

// TestAdminExportToTerminal: `admin export -o -` with stdout on a terminal
// is refused (exit 2) before anything is fetched, rather than pouring a
// binary tar of every entry onto the screen.
func TestAdminExportToTerminal(t *testing.T) {
	f := newFixture(t, nil)
	tty := openPTY(t)
	var stderr bytes.Buffer
	sio := stdio{Stdin: strings.NewReader(""), Stdout: tty, Stderr: &stderr, Getenv: func(string) string { return "" }}
	code := dispatch(t.Context(), []string{"admin", "export", "--namespace", "team", "-o", "-", "--url", f.srv.URL, "--token", adminSecret}, sio)
	want := "--out - writes the tar to stdout, which is a terminal: redirect it (> export.tar), pipe it, or give --out FILE"
	if code != 2 || !strings.Contains(stderr.String(), want) {
		t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, stderr.String(), want)
	}
}
