// The PostgreSQL JDBC driver (pgjdbc, Debian's libpostgresql-jdbc-java) against `vev serve`:
// what a Java application and a BI tool's schema browser send, each result printed as one
// JSON line for the Rust test (tests/drivers.rs) to check.
//
// Usage: java -cp /usr/share/java/postgresql.jar JdbcClient.java PORT
import java.sql.*;
import java.util.ArrayList;
import java.util.List;

public class JdbcClient {
    static void out(String name, String json) {
        System.out.println("{\"name\":\"" + name + "\",\"value\":" + json + "}");
    }

    static String str(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static String list(List<String> items) {
        return "[" + String.join(",", items) + "]";
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://127.0.0.1:" + args[0] + "/app";
        try (Connection c = DriverManager.getConnection(url, "vev", "")) {
            out("version", str(c.getMetaData().getDatabaseProductName()));
            try (Statement s = c.createStatement()) {
                s.execute("CREATE TABLE person (id int PRIMARY KEY, name varchar(20) NOT NULL, "
                        + "born timestamp, score float8, ok boolean)");
            }
            try (PreparedStatement p = c.prepareStatement("INSERT INTO person VALUES (?, ?, ?, ?, ?)")) {
                for (int i = 1; i <= 3; i++) {
                    p.setInt(1, i);
                    p.setString(2, "p" + i);
                    p.setTimestamp(3, Timestamp.valueOf("2020-01-0" + i + " 10:00:00"));
                    p.setDouble(4, i * 1.5);
                    p.setBoolean(5, i % 2 == 0);
                    p.addBatch();
                }
                int total = 0;
                for (int n : p.executeBatch()) total += n;
                out("batch", Integer.toString(total));
            }
            c.setAutoCommit(false);
            try (PreparedStatement p = c.prepareStatement("UPDATE person SET score = score + ? WHERE id = ?")) {
                p.setDouble(1, 10);
                p.setInt(2, 2);
                p.executeUpdate();
            }
            c.commit();
            try (Statement s = c.createStatement()) {
                s.executeUpdate("UPDATE person SET score = 0 WHERE id = 3");
            }
            c.rollback();
            c.setAutoCommit(true);
            // Past pgjdbc's prepareThreshold (5) the statement is prepared on the server and
            // its results come in binary.
            List<String> rows = new ArrayList<>();
            for (int round = 0; round < 7; round++) {
                rows.clear();
                try (PreparedStatement p = c.prepareStatement(
                        "SELECT id, name, born, score, ok FROM person WHERE id >= ? ORDER BY id")) {
                    p.setInt(1, 2);
                    try (ResultSet r = p.executeQuery()) {
                        while (r.next()) {
                            rows.add(list(List.of(Integer.toString(r.getInt(1)), str(r.getString(2)),
                                    str(r.getTimestamp(3).toString()), Double.toString(r.getDouble(4)),
                                    Boolean.toString(r.getBoolean(5)))));
                        }
                    }
                }
            }
            out("select", list(rows));
            DatabaseMetaData m = c.getMetaData();
            List<String> tables = new ArrayList<>();
            try (ResultSet r = m.getTables(null, null, "%", new String[] {"TABLE"})) {
                while (r.next()) tables.add(list(List.of(str(r.getString("TABLE_SCHEM")),
                        str(r.getString("TABLE_NAME")), str(r.getString("TABLE_TYPE")))));
            }
            out("tables", list(tables));
            List<String> cols = new ArrayList<>();
            try (ResultSet r = m.getColumns(null, "public", "person", "%")) {
                while (r.next()) cols.add(list(List.of(str(r.getString("COLUMN_NAME")),
                        str(r.getString("TYPE_NAME")), Integer.toString(r.getInt("DATA_TYPE")),
                        Integer.toString(r.getInt("COLUMN_SIZE")), str(r.getString("IS_NULLABLE")),
                        Integer.toString(r.getInt("ORDINAL_POSITION")))));
            }
            out("columns", list(cols));
            List<String> keys = new ArrayList<>();
            try (ResultSet r = m.getPrimaryKeys(null, null, "person")) {
                while (r.next()) keys.add(list(List.of(str(r.getString("COLUMN_NAME")),
                        Integer.toString(r.getInt("KEY_SEQ")), str(r.getString("PK_NAME")))));
            }
            out("primary-keys", list(keys));
            try (ResultSet r = m.getTables(null, null, "nomatch%", null)) {
                out("no-tables", Boolean.toString(r.next()));
            }
            try (Statement s = c.createStatement()) {
                s.executeQuery("SELECT * FROM nosuch");
            } catch (SQLException e) {
                out("unknown-table", str(e.getSQLState()));
            }
            try (Statement s = c.createStatement()) {
                s.executeUpdate("INSERT INTO person (id, name) VALUES (1, 'again')");
            } catch (SQLException e) {
                out("duplicate", str(e.getSQLState()));
            }
        }
    }
}
