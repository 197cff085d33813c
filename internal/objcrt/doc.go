// Package objcrt is what StartLux's darwin code needs of the Objective-C
// runtime on top of purego's objc package: objc_msgSend as typed Go
// functions registered once (purego's generic objc.Send registers a new
// function through reflection on every call), autorelease pools, and
// NSString and NSError conversions.
//
// Everything here is for darwin; on other systems the package is empty.
// None of it has run in this project's CI, which has no Mac (see
// docs/metal.md and docs/app.md).
package objcrt
