//go:build unix

package main

import "syscall"

// terminate sends SIGTERM to every process of the command's group, then
// SIGCONT, so that a stopped process gets it too.
func (c *child) terminate() {
	_ = syscall.Kill(-c.pgid, syscall.SIGTERM)
	_ = syscall.Kill(-c.pgid, syscall.SIGCONT)
}

// kill sends SIGKILL to every process of the command's group.
func (c *child) kill() {
	_ = syscall.Kill(-c.pgid, syscall.SIGKILL)
}

// groupRunning reports whether a process of the command's group, the
// command included, runs.
func (c *child) groupRunning() bool {
	return groupRunning(c.pgid)
}
