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
