-- MyISAM numbers an AUTO_INCREMENT that is the second column of a key per group of the first.
CREATE TABLE hit_per_group (grp INT NOT NULL, seq INT NOT NULL AUTO_INCREMENT, PRIMARY KEY (grp, seq)) ENGINE=MyISAM;
CREATE TABLE ok_leading (id INT NOT NULL AUTO_INCREMENT, grp INT NOT NULL, PRIMARY KEY (id), KEY (grp, id)) ENGINE=MyISAM;
CREATE TABLE ok_leading_secondary (grp INT NOT NULL, seq INT NOT NULL AUTO_INCREMENT, PRIMARY KEY (grp, seq), KEY (seq)) ENGINE=MyISAM;
