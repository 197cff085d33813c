package value

import (
	"fmt"
	"strings"
	"testing"
)

// parseBenchDocs are request documents to parse: a typical request, and one
// with a large evidence table.
func parseBenchDocs() map[string]string {
	small := `{"evidence":{"store":"north","items":[{"name":"stapler","qty":7},{"name":"lamp","qty":6.5}]},` +
		`"questions":{"q0":{"type":"choice","instructions":"Which item has the largest quantity?","criteria":{"lamp":"lamp","stapler":"stapler"}},` +
		`"q1":{"type":"noul","instructions":"Is there any lamp in stock?"}}}`
	var b strings.Builder
	b.WriteString(`{"evidence":{"rows":[`)
	for i := range 2000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"item \"%d\"","price":%d.25,"tags":["a","b\u00e9"],"ok":true,"note":null}`, i, i, i)
	}
	b.WriteString(`]},"questions":{"q":{"type":"score","instructions":"How full?","criteria":["low","mid","high"]}}}`)
	return map[string]string{"small": small, "table": b.String()}
}

// countValues counts the nodes of a value tree.
func countValues(v *Value) int {
	n := 1
	for i := range v.Arr {
		n += countValues(&v.Arr[i])
	}
	for i := range v.Obj {
		n += countValues(&v.Obj[i].Value)
	}
	return n
}

// BenchmarkParseJSON parses request documents into value trees, reporting
// the time per value of a typical request ("small") and of a large evidence
// table ("table").
func BenchmarkParseJSON(b *testing.B) {
	for _, name := range []string{"small", "table"} {
		doc := []byte(parseBenchDocs()[name])
		b.Run(name, func(b *testing.B) {
			v, err := ParseJSON(doc)
			if err != nil {
				b.Fatal(err)
			}
			n := countValues(&v)
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := ParseJSON(doc); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/value")
		})
	}
}

// BenchmarkParseMsgpack is BenchmarkParseJSON for the same documents as
// msgpack (the daemon's params).
func BenchmarkParseMsgpack(b *testing.B) {
	for _, name := range []string{"small", "table"} {
		v, err := ParseJSON([]byte(parseBenchDocs()[name]))
		if err != nil {
			b.Fatal(err)
		}
		doc, err := AppendMsgpack(nil, &v)
		if err != nil {
			b.Fatal(err)
		}
		n := countValues(&v)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := ParseMsgpack(doc); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/value")
		})
	}
}
