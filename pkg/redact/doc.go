// Package redact owns keeping credentials and Secret data out of text that
// leaves the process: logs, errors shown to users, and the status documents
// an agent commits to Git.
//
// One mask (Mask) and one length bound (MaxLength) serve every caller:
//
//   - URL drops the credentials of a remote URL (for logs, records and
//     caches keyed by the URL);
//   - Text removes anything that may be Secret data from free text (PEM
//     blocks, URL passwords, data/stringData/binaryData values in JSON, YAML
//     and Go map form, credential-looking pairs, base64-looking blobs);
//   - a Scrubber does Text and also removes the secret values a process was
//     configured with (a Git password or token) and every URL's userinfo,
//     then bounds the length: what an agent logs and reports.
//
// It errs on removing too much: a message a user cannot read in full is a
// smaller harm than a token in a Git history.
package redact
