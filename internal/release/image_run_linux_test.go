package release

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/verdictgate/verdict/internal/testing/testtool"
)

// TestImagesRun runs each image's version command the way a container runtime would, without
// one: the image's layers, flattened, are the whole root directory, read-only; the binary is the
// config's entrypoint, run chrooted there as the config's user with the config's environment and
// working directory only, in a user namespace (no privilege on this machine) and a network
// namespace (no network) of its own. That it prints its version shows the image holds all the
// binary needs to start.
func TestImagesRun(t *testing.T) {
	_, arts := testRelease(t)
	for _, d := range Daemons {
		t.Run(d.Command, func(t *testing.T) {
			img, _ := readImage(t, artifact(t, arts, "image", d.Command))
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			c := cf.Config
			if len(c.Entrypoint) == 0 {
				t.Fatal("the image has no entrypoint")
			}
			uid, gid := imageUser(t, c.User)
			args := append(slices.Clone(c.Entrypoint), "version")
			// The path is the entrypoint's inside the root directory: the child resolves it
			// after chroot, so no file of this machine can stand in for it.
			cmd := &exec.Cmd{Path: args[0], Args: args, Env: append([]string{}, c.Env...), Dir: c.WorkingDir}
			cmd.SysProcAttr = &syscall.SysProcAttr{
				Chroot:      unpackRoot(t, img),
				Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
				UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: os.Geteuid(), Size: 1}},
				GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: os.Getegid(), Size: 1}},
			}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EINVAL) {
					testtool.Missing(t, fmt.Sprintf("this machine does not let a test start a process in a user namespace of its own (%v); the images are read back (TestImages), not run", err))
				}
				t.Fatalf("start %s from the image: %v", args[0], err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%s from the image: %v\n%s", strings.Join(args, " "), err, out.Bytes())
			}
			if !strings.Contains(out.String(), d.Command+" version "+testSource.Version) {
				t.Errorf("%s from the image printed %q", strings.Join(args, " "), out.Bytes())
			}
		})
	}
}

// imageUser reads a config's numeric user, uid:gid.
func imageUser(t *testing.T, user string) (uid, gid int) {
	t.Helper()
	u, g, ok := strings.Cut(user, ":")
	uid, uerr := strconv.Atoi(u)
	gid, gerr := strconv.Atoi(g)
	if !ok || uerr != nil || gerr != nil {
		t.Fatalf("user %q is not numeric uid:gid", user)
	}
	return uid, gid
}

// unpackRoot writes img's flattened layers into a new directory and returns it, made read-only
// as a container's root is. It holds only directories and regular files, which is all a release
// image has.
func unpackRoot(t *testing.T, img v1.Image) string {
	t.Helper()
	root := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	var dirs []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "/")
		if !filepath.IsLocal(name) {
			t.Fatalf("layer entry %q escapes the root", h.Name)
		}
		p := filepath.Join(root, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, p)
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, h.FileInfo().Mode().Perm()&^0o222)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("layer entry %q of type %c", h.Name, h.Typeflag)
		}
	}
	dirs = append(dirs, root)
	for _, d := range dirs {
		if err := os.Chmod(d, 0o555); err != nil {
			t.Fatal(err)
		}
	}
	// Writable again at the end, so that the temporary directory can be removed.
	t.Cleanup(func() {
		for _, d := range dirs {
			os.Chmod(d, 0o755)
		}
	})
	return root
}
