// Package web holds the console: static HTML, CSS and ES modules with
// vendored libraries under vendor/, embedded in the binary. There is no
// build step; the control plane serves these files as they are.
package web

import "embed"

// FS is the console's files: index.html at the root, the application's
// modules and styles under app/, third-party modules under vendor/.
//
//go:embed index.html app vendor
var FS embed.FS
