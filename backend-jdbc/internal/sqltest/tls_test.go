package sqltest

// TLSTests picks, for a run on the TLS test server, the conformance suite
// (whose checks of connections, and of passwords in errors, run on the
// plain server: TestTLSOpenFailures covers those of TLS).
func TLSTests(name string) bool { return name == "Conformance" }
