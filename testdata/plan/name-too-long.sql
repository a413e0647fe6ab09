-- _<t>_old must fit in 64 characters: t may have at most 59.
CREATE TABLE hit_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa (id INT PRIMARY KEY) ENGINE=MyISAM;
CREATE TABLE ok_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa (id INT PRIMARY KEY) ENGINE=MyISAM;
