package metal

import "fmt"

// DeviceInfo is what a Metal device reports of itself, for diagnostics
// (startlux doctor).
type DeviceInfo struct {
	// Name is the device's name (MTLDevice name).
	Name string
	// Families are the GPU families it supports (supportsFamily:), such as
	// "Apple9" and "Metal3", newest Apple family first.
	Families []string
	// RecommendedMaxWorkingSetSize is how much memory the device can use
	// with good performance, in bytes.
	RecommendedMaxWorkingSetSize uint64
	// MaxBufferLength is the largest buffer in bytes.
	MaxBufferLength uint64
	// UnifiedMemory is whether the GPU shares the CPU's memory.
	UnifiedMemory bool
	// LibraryErr says why the kernel library did not compile
	// (newLibraryWithSource:options:error:); "" when it did.
	LibraryErr string
}

// gpuFamily is one MTLGPUFamily value (MTLDevice.h, an NSInteger).
type gpuFamily struct {
	name  string
	value int
}

// gpuFamilies are the families asked about, newest Apple family first:
// MTLGPUFamilyApple1 = 1001 … MTLGPUFamilyApple10 = 1010, then
// MTLGPUFamilyMetal3 = 5001 and MTLGPUFamilyMetal4 = 5002 (macOS 26).
func gpuFamilies() []gpuFamily {
	var fs []gpuFamily
	for v := 10; v >= 1; v-- {
		fs = append(fs, gpuFamily{fmt.Sprintf("Apple%d", v), 1000 + v})
	}
	return append(fs, gpuFamily{"Metal3", 5001}, gpuFamily{"Metal4", 5002})
}

// familyNames lists the families supports reports: the newest Apple family
// (a device supporting AppleN supports every older one, so only the newest
// is named) and the Metal feature families.
func familyNames(supports func(value int) bool) []string {
	var out []string
	apple := false
	for _, f := range gpuFamilies() {
		isApple := f.value < 2000
		if isApple && apple {
			continue
		}
		if supports(f.value) {
			out = append(out, f.name)
			apple = apple || isApple
		}
	}
	return out
}
