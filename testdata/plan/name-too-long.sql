-- <t>_emswap (the cut-over sentry) must fit in 64 characters: t may have at most 57.
CREATE TABLE hit_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa (id INT PRIMARY KEY) ENGINE=MyISAM;
CREATE TABLE ok_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa (id INT PRIMARY KEY) ENGINE=MyISAM;
