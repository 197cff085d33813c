package app

import (
	"context"
	"strings"
	"sync"
)

// flatItem is one menu entry in the order views create them, with the index
// of its parent (-1 at the top level).
type flatItem struct {
	Item
	parent int
}

// flatten lists items depth-first; views that build native menus item by
// item walk this list.
func flatten(items []Item) []flatItem {
	var out []flatItem
	var walk func([]Item, int)
	walk = func(items []Item, parent int) {
		for _, it := range items {
			out = append(out, flatItem{Item: it, parent: parent})
			if len(it.Children) > 0 {
				walk(it.Children, len(out)-1)
			}
		}
	}
	walk(items, -1)
	return out
}

// shapeOf is a key that changes when the menu's structure changes (not its
// titles, checks or enabled states), so views can update in place when it
// stays the same.
func shapeOf(flat []flatItem) string {
	var b strings.Builder
	for _, f := range flat {
		switch {
		case f.Separator:
			b.WriteByte('-')
		case len(f.Children) > 0:
			b.WriteByte('>')
		case f.Checkable:
			b.WriteByte('c')
		default:
			b.WriteByte('.')
		}
		b.WriteByte(byte('0' + (f.parent+1)%64))
	}
	return b.String()
}

// clicks maps a view's item positions to the actions they carry now and
// sends a click to the controller off the UI thread.
type clicks struct {
	ctx  context.Context
	ctrl *Controller

	mu      sync.Mutex
	actions []string
	gen     int // bumped when a view rebuilds its native items
}

// rebuilt starts a new generation of native items and returns its number;
// clicks from older items are then ignored.
func (c *clicks) rebuilt() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	return c.gen
}

func (c *clicks) set(flat []flatItem) {
	a := make([]string, len(flat))
	for i, f := range flat {
		a[i] = f.Action
	}
	c.mu.Lock()
	c.actions = a
	c.mu.Unlock()
}

// click handles a click on the item at position i of generation gen (0:
// the view rebuilds every time, so any position is current).
func (c *clicks) click(gen, i int) {
	c.mu.Lock()
	var action string
	if i >= 0 && i < len(c.actions) && (gen == 0 || gen == c.gen) {
		action = c.actions[i]
	}
	c.mu.Unlock()
	if action != "" {
		go c.ctrl.Handle(c.ctx, action) // failures show on the menu
	}
}
