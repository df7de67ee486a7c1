package simba

// SetKeepAliveReplyHook makes f run between the receipt of each keep-alive
// reply and its application, until the returned function restores the
// previous hook. Tests only: the hook is a package variable.
func SetKeepAliveReplyHook(f func()) (restore func()) {
	prev := testHookKeepAliveReply.Swap(&f)
	return func() { testHookKeepAliveReply.Store(prev) }
}

// Resolved returns c with its defaults filled in, as New uses it.
func (c Config) Resolved() Config {
	r, _ := c.resolve()
	return r
}

// SessionMapSizes reports how many names the live session's records of
// released tokens and of unsure calls hold, or -1s without a session.
func (c *Client) SessionMapSizes() (released, unsure int) {
	c.lock()
	defer c.unlock()
	if c.sess == nil {
		return -1, -1
	}
	return len(c.sess.released), len(c.sess.unsure)
}
