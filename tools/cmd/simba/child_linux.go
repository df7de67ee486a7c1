package main

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// commandAttr starts the command as the leader of a process group of its
// own, and has the kernel send it SIGKILL when simba dies without stopping
// it (SIGKILL of simba, the OOM killer, a crash).
//
// SIGKILL rather than SIGTERM: once simba is dead nobody escalates to
// SIGKILL after --grace, and a command that catches or ignores SIGTERM
// would run on while its lease expires at the backend and another node
// takes it over. The signal reaches the command itself only: the other
// processes of its group are out of reach (see the README).
//
// Pdeathsig fires when the thread that forked the command ends, not when
// the process does. That thread lives as long as simba: the Go runtime ends
// a thread only when a goroutine locked to it with runtime.LockOSThread
// returns without unlocking it, and neither simba nor the libraries it
// links lock a goroutine to a thread. The runtime also checks, in the child
// before exec, that the parent did not die before Pdeathsig was set.
func commandAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// groupRunning reports whether a process of group pgid runs. kill(-pgid, 0)
// counts the zombies too, processes that have exited and wait for their
// parent (or, orphaned, for init, which may take a while) to collect
// them: when it finds a process, /proc tells whether one of the group is
// not a zombie.
func groupRunning(pgid int) bool {
	if syscall.Kill(-pgid, 0) == syscall.ESRCH {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	want := []byte(strconv.Itoa(pgid))
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) >= 3 && bytes.Equal(f[2], want) && f[0][0] != 'Z' && f[0][0] != 'X' {
			return true
		}
	}
	return false
}
