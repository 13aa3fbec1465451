package storetest

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

// MakeReadOnly takes write access to dir away from this process, as an
// operator's chmod or a read-only remount does, and returns the function
// that gives it back. Root writes through mode bits, so as root dir is
// bind-mounted read-only onto itself (EROFS; files the process holds open
// stay writable, as on a remount); as another user it is chmod 0500
// (EACCES). Where neither works (root without CAP_SYS_ADMIN, no mount(8)),
// the test is skipped, saying why. The cleanup gives access back if the
// test did not.
func MakeReadOnly(t testing.TB, dir string) (restore func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		return once(t, func() error { return os.Chmod(dir, 0o755) })
	}
	if out, err := exec.Command("mount", "--bind", dir, dir).CombinedOutput(); err != nil {
		t.Skipf("running as root, which writes through mode bits, and a read-only bind mount of %s failed (%v: %s): run the test as a non-root user or with CAP_SYS_ADMIN", dir, err, out)
	}
	if out, err := exec.Command("mount", "-o", "remount,ro,bind", dir).CombinedOutput(); err != nil {
		_ = exec.Command("umount", dir).Run()
		t.Skipf("running as root, which writes through mode bits, and remounting the bind mount of %s read-only failed (%v: %s): run the test as a non-root user", dir, err, out)
	}
	return once(t, func() error {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			return errors.New(string(out))
		}
		return nil
	})
}

// once returns restore, which runs give once: at the test's call, or at
// its cleanup.
func once(t testing.TB, give func() error) func() {
	done := false
	restore := func() {
		if done {
			return
		}
		done = true
		if err := give(); err != nil {
			t.Errorf("give write access back: %v", err)
		}
	}
	t.Cleanup(restore)
	return restore
}
