// Package backendkit holds what every Simba backend needs and no backend
// should write on its own, so that each behaves the same way. Backend
// modules import it; applications have no need to.
//
// It starts with credential masking, the rule behind the promise that no
// output of Simba shows a password:
//
//   - [IsCredentialParam] tells which URL query or DSN parameters hold a
//     credential, by the shape of the name (sslpassword, sentinel_password,
//     auth_token, ...) and not by a word found anywhere in it, so that
//     flags that only speak of credentials (allowCleartextPasswords,
//     require_auth, authSource) stay readable.
//   - [RedactURL] prints a parsed URL with its password and the values of
//     its credential parameters replaced by [Mask], taken apart
//     structurally: every other byte is printed as written.
//   - [URLSecrets] lists the credential values a URL holds, and [MaskText]
//     and [MaskError] hide them in text that is not the backend's own (a
//     driver's message, a whole error chain). Free text cannot be taken
//     apart, so the values are searched for, and only those long and
//     unusual enough to be a secret ([Maskable]): a short value such as
//     "1" or "md5" would match addresses, ports and words.
//
// Where the text is the backend's own, it prints it structurally
// ([RedactURL]) instead of searching it: that masks a short password too.
//
// It also checks what a user typed before anything is dialled, so that
// every backend names a mistake the same way: [CheckBlank] for an empty or
// blank URL, [SplitAddress] for one HOST[:PORT] (the port of "h:1:99" is
// "1:99", not a host "h:1"; a missing host is "no host"), [CheckScheme]
// for the scheme of a URL, [ParseURL] for a URL whose password a parser
// could misread, and [CheckIdentity] for the identity a session carries.
//
// Session ids: [NewSessionID] makes the 128 random bits a backend's
// sessions are named by (R-SES-2), and [ValidSessionID] tells an id that
// no session of such a backend can have, so that it is answered for
// without asking the server.
//
// A backend package registers its URL schemes with simba.RegisterBackend
// through [Register], which adapts the package's own Open.
package backendkit
