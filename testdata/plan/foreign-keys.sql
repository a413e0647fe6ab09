-- An InnoDB child created (with checks off) against a parent that is MyISAM: not enforced today.
SET foreign_key_checks = 0;
CREATE TABLE ok_child (id INT PRIMARY KEY, parent_id INT, KEY (parent_id), CONSTRAINT fk_parent FOREIGN KEY (parent_id) REFERENCES hit_parent (id)) ENGINE=InnoDB;
CREATE TABLE hit_parent (id INT PRIMARY KEY) ENGINE=MyISAM;
SET foreign_key_checks = 1;
CREATE TABLE ok_unrelated (id INT PRIMARY KEY) ENGINE=MyISAM;
