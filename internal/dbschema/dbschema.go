// Package dbschema is the table creation the packages that own tables
// (order, outbox) share: a table is created from its model, or only the
// model's missing columns are added to it.
//
// gorm's AutoMigrate is not run over an existing table: it drops every
// single-column unique index the model's struct tags do not declare (the
// packages declare their indexes by name, outside the tags, and create them
// after the table) and rebuilds columns whose definition it reads back
// differently (MODIFY COLUMN of a DECIMAL with a default, on every run).
// A process migrating at its start would then leave the table without its
// unique key while other processes write — for good if it or the database
// died before the index was made again — and lock the table for the
// rebuild in the middle of a sale.
package dbschema

import (
	"fmt"
	"strings"
	"sync"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// CreateOrAddColumns creates table from model when it does not exist, else
// adds the columns of model the table lacks. It never drops or alters an
// existing column or index.
func CreateOrAddColumns(d *gorm.DB, table string, model any) error {
	m := d.Table(table).Migrator()
	if !m.HasTable(table) {
		return m.CreateTable(model)
	}
	cols, err := m.ColumnTypes(model)
	if err != nil {
		return err
	}
	have := make(map[string]bool, len(cols))
	for _, c := range cols {
		have[strings.ToLower(c.Name())] = true
	}
	s, err := schema.Parse(model, &sync.Map{}, d.NamingStrategy)
	if err != nil {
		return err
	}
	for _, name := range s.DBNames {
		if have[strings.ToLower(name)] {
			continue
		}
		if err := m.AddColumn(model, name); err != nil {
			return fmt.Errorf("add column %s: %w", name, err)
		}
	}
	return nil
}
