//go:build unix && !linux

package main

import "syscall"

// commandAttr starts the command as the leader of a process group of its
// own. There is no Pdeathsig outside Linux: when simba dies without
// stopping the command (SIGKILL, a crash), the command runs on.
func commandAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupRunning reports whether a process of group pgid exists; a zombie
// not yet collected counts.
func groupRunning(pgid int) bool {
	return syscall.Kill(-pgid, 0) != syscall.ESRCH
}
