//go:build !unix

package main

import "syscall"

// commandAttr is nil without process groups: simba stops the command
// itself, not the processes it started.
func commandAttr() *syscall.SysProcAttr { return nil }

// terminate asks the command to exit, or kills it where it cannot be asked.
func (c *child) terminate() {
	if c.cmd.Process.Signal(syscall.SIGTERM) != nil {
		_ = c.cmd.Process.Kill()
	}
}

// kill kills the command.
func (c *child) kill() { _ = c.cmd.Process.Kill() }

// groupRunning reports whether the command runs.
func (c *child) groupRunning() bool { return !c.exited() }
